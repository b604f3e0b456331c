#include "core/build_id.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

namespace convcore {
namespace {

struct Search {
    const void* base;  // load address of libconvcore (dladdr of a function in it)
    std::string id;
};

// dl_iterate_phdr callback: in the object loaded at s->base, the PT_NOTE segments' notes of
// type NT_GNU_BUILD_ID and name "GNU" (ELF gABI: namesz, descsz, type, then name and
// descriptor, each padded to 4 bytes).
int find_note(dl_phdr_info* info, size_t, void* data) {
    auto* s = static_cast<Search*>(data);
    if (reinterpret_cast<const void*>(info->dlpi_addr) != s->base) return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
        const unsigned char* end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            ElfW(Nhdr) nh;
            std::memcpy(&nh, p, sizeof nh);
            const unsigned char* name = p + sizeof nh;
            const unsigned char* desc = name + ((nh.n_namesz + 3) & ~3u);
            if (desc + nh.n_descsz > end) break;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
                static const char hex[] = "0123456789abcdef";
                for (uint32_t b = 0; b < nh.n_descsz; ++b) {
                    s->id += hex[desc[b] >> 4];
                    s->id += hex[desc[b] & 15];
                }
                return 1;
            }
            p = desc + ((nh.n_descsz + 3) & ~3u);
        }
    }
    return 1;  // the right object, without a build ID
}

}  // namespace

const std::string& library_build_id() {
    static const std::string id = [] {
        Dl_info info{};
        if (!dladdr(reinterpret_cast<const void*>(&library_build_id), &info) || !info.dli_fbase) return std::string();
        Search s{info.dli_fbase, {}};
        dl_iterate_phdr(find_note, &s);
        return s.id;
    }();
    return id;
}

}  // namespace convcore
