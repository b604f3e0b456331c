// The library's own GNU build ID (the linker's hash of the linked code, ld --build-id), as hex:
// it changes whenever any code of libconvcore changes, where the version number does not. The
// find-db keys its records with it, so a rebuilt library re-times what an older build measured.
#pragma once
#include <string>

namespace convcore {

// "" when the library carries no build ID (linked without --build-id, or not an ELF object).
const std::string& library_build_id();

}  // namespace convcore
