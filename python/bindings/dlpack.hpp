// DLPack data structures, written from the DLPack specification (v1.0,
// https://dmlc.github.io/dlpack/latest/c_api.html and the Python protocol at
// https://dmlc.github.io/dlpack/latest/python_spec.html). Only what a consumer needs.
//
// Python protocol, consumer side:
//   capsule = obj.__dlpack__(stream=..., max_version=(1, 0))
//   name "dltensor_versioned" -> DLManagedTensorVersioned*, "dltensor" -> DLManagedTensor*
//   The consumer renames the capsule to "used_dltensor_versioned" / "used_dltensor", which
//   makes it the owner: it must call the tensor's deleter (when not NULL) once it is done.
#pragma once
#include <cstdint>

extern "C" {

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0

// Bits of DLManagedTensorVersioned::flags.
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

// A C enum, so int-sized.
typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,  // pinned host memory
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17,
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5,
    kDLBool = 6,
} DLDataTypeCode;

typedef struct {
    uint8_t code;   // a DLDataTypeCode
    uint8_t bits;   // bits per lane
    uint16_t lanes; // 1 for scalars
} DLDataType;

typedef struct {
    void* data;            // start of the allocation; the first element is at data + byte_offset
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t* shape;        // ndim entries
    int64_t* strides;      // ndim entries, in elements; NULL means compact row-major
    uint64_t byte_offset;
} DLTensor;

// Pre-1.0 (unversioned) managed tensor: capsule name "dltensor".
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

// DLPack 1.0 managed tensor: capsule name "dltensor_versioned". The version field comes
// first so a consumer can check it before reading anything else.
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void* manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned* self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

}  // extern "C"
