/* The ACL runtime and aclnn types, enum values and return codes that the native layer
 * uses, exactly as CANN publishes them (acl/acl_base.h, acl/acl_rt.h,
 * acl/error_codes/rt_error_codes.h, aclnn/acl_meta.h, the aclnn return codes).
 *
 * We never include the toolkit's headers: the layer must build on a machine without
 * CANN. The lists below are X-macros so that one text serves three readers:
 *   - the C layer (default): plain typedefs, enums and constants;
 *   - the cffi cdef (OPS_CDEF): the same declarations, after the preprocessor;
 *   - `make check-cann-headers` (OPS_CHECK_HEADERS, C++): static_asserts comparing every
 *     value and typedef with the real headers, which that translation unit includes.
 * Only the enumerators the layer, the simulator or ggml-cann use are listed; values and
 * struct field orders are CANN's.
 */
#ifndef OPS_ACL_TYPES_H
#define OPS_ACL_TYPES_H

#if !defined(OPS_CDEF) && !defined(OPS_CHECK_HEADERS)
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#endif

/* ---- how each kind of declaration is spelled by each reader ---- */
#define OPS_ENUM_ITEM(name, value) name = value,
#ifdef OPS_CHECK_HEADERS
#define OPS_ENUM_CHECK(name, value) static_assert((name) == (value), #name " differs from CANN's value");
#define ACL_OPAQUE(name) static_assert(std::is_same<name, struct name>::value, #name);
#define ACL_TYPEDEF(type, name) static_assert(std::is_same<name, type>::value, #name " differs from CANN's typedef");
#define ACL_ENUM(name, list) list(OPS_ENUM_CHECK)
#define ACL_CONSTS(list) list(OPS_ENUM_CHECK)
/* a struct: a twin laid out from our field list must match CANN's size and every field's
 * offset and type */
#define OPS_FIELD_DECL(s, type, field) type field;
#define OPS_FIELD_CHECK(s, type, field)                                                 \
    static_assert(offsetof(s, field) == offsetof(ops_twin_##s, field), #s "." #field " offset"); \
    static_assert(std::is_same<decltype(s::field), type>::value, #s "." #field " type");
#define ACL_STRUCT(name, fields)                                                        \
    struct ops_twin_##name { fields(OPS_FIELD_DECL, name) };                            \
    static_assert(sizeof(name) == sizeof(ops_twin_##name), #name " size differs from CANN's"); \
    fields(OPS_FIELD_CHECK, name)
#else
#define ACL_OPAQUE(name) typedef struct name name;
#define ACL_TYPEDEF(type, name) typedef type name;
#define ACL_ENUM(name, list) typedef enum { list(OPS_ENUM_ITEM) } name;
#define ACL_CONSTS(list) enum { list(OPS_ENUM_ITEM) };
/* fields(X, s) lists X(s, type, field) in CANN's order */
#define OPS_FIELD_DECL(s, type, field) type field;
#define ACL_STRUCT(name, fields) typedef struct name { fields(OPS_FIELD_DECL, name) } name;
#endif

/* ---- acl/acl_base.h ---- */
ACL_TYPEDEF(void *, aclrtStream)
ACL_TYPEDEF(void *, aclrtEvent)
ACL_TYPEDEF(void *, aclrtContext)
ACL_TYPEDEF(int, aclError)
ACL_OPAQUE(aclOpExecutor)

#define OPS_ACL_DATA_TYPES(X)                                                          \
    X(ACL_DT_UNDEFINED, -1) X(ACL_FLOAT, 0) X(ACL_FLOAT16, 1) X(ACL_INT8, 2)           \
    X(ACL_INT32, 3) X(ACL_UINT8, 4) X(ACL_INT16, 6) X(ACL_UINT16, 7) X(ACL_UINT32, 8) \
    X(ACL_INT64, 9) X(ACL_UINT64, 10) X(ACL_DOUBLE, 11) X(ACL_BOOL, 12)                \
    X(ACL_STRING, 13) X(ACL_COMPLEX64, 16) X(ACL_COMPLEX128, 17) X(ACL_BF16, 27)       \
    X(ACL_INT4, 29) X(ACL_UINT1, 30) X(ACL_COMPLEX32, 33)
ACL_ENUM(aclDataType, OPS_ACL_DATA_TYPES)

#define OPS_ACL_FORMATS(X)                                                             \
    X(ACL_FORMAT_UNDEFINED, -1) X(ACL_FORMAT_NCHW, 0) X(ACL_FORMAT_NHWC, 1)            \
    X(ACL_FORMAT_ND, 2) X(ACL_FORMAT_NC1HWC0, 3) X(ACL_FORMAT_FRACTAL_Z, 4)            \
    X(ACL_FORMAT_NDHWC, 27) X(ACL_FORMAT_FRACTAL_NZ, 29) X(ACL_FORMAT_NCDHW, 30)       \
    X(ACL_FORMAT_NC, 35) X(ACL_FORMAT_NCL, 47)
ACL_ENUM(aclFormat, OPS_ACL_FORMATS)

/* ACL return codes (acl_base.h) */
#define OPS_ACL_ERRORS(X)                                                              \
    X(ACL_SUCCESS, 0) X(ACL_ERROR_INVALID_PARAM, 100000)                               \
    X(ACL_ERROR_UNINITIALIZE, 100001) X(ACL_ERROR_REPEAT_INITIALIZE, 100002)           \
    X(ACL_ERROR_REPEAT_FINALIZE, 100037) X(ACL_ERROR_BAD_ALLOC, 200000)                \
    X(ACL_ERROR_API_NOT_SUPPORT, 200001) X(ACL_ERROR_INVALID_DEVICE, 200002)           \
    X(ACL_ERROR_INVALID_RESOURCE_HANDLE, 200005) X(ACL_ERROR_INTERNAL_ERROR, 500000)   \
    X(ACL_ERROR_FAILURE, 500001)
ACL_CONSTS(OPS_ACL_ERRORS)

/* runtime return codes (acl/error_codes/rt_error_codes.h) */
#define OPS_ACL_RT_ERRORS(X)                                                           \
    X(ACL_ERROR_RT_PARAM_INVALID, 107000) X(ACL_ERROR_RT_INVALID_DEVICEID, 107001)     \
    X(ACL_ERROR_RT_CONTEXT_NULL, 107002) X(ACL_ERROR_RT_ADDR_UNALIGNED, 107008)        \
    X(ACL_ERROR_RT_INVALID_MEMORY_TYPE, 107016) X(ACL_ERROR_RT_INVALID_HANDLE, 107017) \
    X(ACL_ERROR_RT_STREAM_CAPTURED, 107027) X(ACL_ERROR_RT_EVENT_CAPTURED, 107028)     \
    X(ACL_ERROR_RT_STREAM_NOT_CAPTURED, 107029)                                        \
    X(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, 107030)                                   \
    X(ACL_ERROR_RT_MODEL_RUNNING, 107037)                                              \
    X(ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD, 107038)                                \
    X(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, 207000)                                        \
    X(ACL_ERROR_RT_MEMORY_ALLOCATION, 207001) X(ACL_ERROR_RT_MEMORY_FREE, 207002)      \
    X(ACL_ERROR_RT_INTERNAL_ERROR, 507000) X(ACL_ERROR_RT_EVENT_NOT_COMPLETE, 507006)  \
    X(ACL_ERROR_RT_AICORE_EXCEPTION, 507015)                                           \
    X(ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED, 507903)
ACL_CONSTS(OPS_ACL_RT_ERRORS)

/* ---- acl/acl_rt.h ---- */
#define OPS_ACL_MEMCPY_KINDS(X)                                                        \
    X(ACL_MEMCPY_HOST_TO_HOST, 0) X(ACL_MEMCPY_HOST_TO_DEVICE, 1)                      \
    X(ACL_MEMCPY_DEVICE_TO_HOST, 2) X(ACL_MEMCPY_DEVICE_TO_DEVICE, 3)
ACL_ENUM(aclrtMemcpyKind, OPS_ACL_MEMCPY_KINDS)

#define OPS_ACL_MALLOC_POLICIES(X)                                                     \
    X(ACL_MEM_MALLOC_HUGE_FIRST, 0) X(ACL_MEM_MALLOC_HUGE_ONLY, 1)                     \
    X(ACL_MEM_MALLOC_NORMAL_ONLY, 2)
ACL_ENUM(aclrtMemMallocPolicy, OPS_ACL_MALLOC_POLICIES)

#define OPS_ACL_MEM_ATTRS(X)                                                           \
    X(ACL_DDR_MEM, 0) X(ACL_HBM_MEM, 1) X(ACL_DDR_MEM_HUGE, 2) X(ACL_DDR_MEM_NORMAL, 3)   \
    X(ACL_HBM_MEM_HUGE, 4) X(ACL_HBM_MEM_NORMAL, 5) X(ACL_DDR_MEM_P2P_HUGE, 6)            \
    X(ACL_DDR_MEM_P2P_NORMAL, 7) X(ACL_HBM_MEM_P2P_HUGE, 8) X(ACL_HBM_MEM_P2P_NORMAL, 9)  \
    X(ACL_HBM_MEM_HUGE1G, 10) X(ACL_HBM_MEM_P2P_HUGE1G, 11)
ACL_ENUM(aclrtMemAttr, OPS_ACL_MEM_ATTRS)

/* aclrtCreateEventWithFlag's flags (#defines in acl_rt.h) */
#define OPS_ACL_EVENT_FLAGS(X)                                                         \
    X(ACL_EVENT_SYNC, 0x1) X(ACL_EVENT_CAPTURE_STREAM_PROGRESS, 0x2)                   \
    X(ACL_EVENT_TIME_LINE, 0x8) X(ACL_EVENT_DEVICE_USE_ONLY, 0x10) X(ACL_EVENT_EXTERNAL, 0x20)
ACL_CONSTS(OPS_ACL_EVENT_FLAGS)

/* virtual memory management (aclrtMallocPhysical, aclrtMapMem, ...) */
ACL_TYPEDEF(void *, aclrtDrvMemHandle)

#define OPS_ACL_MEM_LOCATION_TYPES(X)                                                  \
    X(ACL_MEM_LOCATION_TYPE_HOST, 0) X(ACL_MEM_LOCATION_TYPE_DEVICE, 1)                \
    X(ACL_MEM_LOCATION_TYPE_UNREGISTERED, 2) X(ACL_MEM_LOCATION_TYPE_MANAGED, 3)       \
    X(ACL_MEM_LOCATION_TYPE_HOST_NUMA, 4)
ACL_ENUM(aclrtMemLocationType, OPS_ACL_MEM_LOCATION_TYPES)

#define OPS_ACL_MEM_ALLOCATION_TYPES(X) X(ACL_MEM_ALLOCATION_TYPE_PINNED, 0)
ACL_ENUM(aclrtMemAllocationType, OPS_ACL_MEM_ALLOCATION_TYPES)

#define OPS_ACL_MEM_HANDLE_TYPES(X) X(ACL_MEM_HANDLE_TYPE_NONE, 0) X(ACL_MEM_HANDLE_TYPE_POSIX, 2)
ACL_ENUM(aclrtMemHandleType, OPS_ACL_MEM_HANDLE_TYPES)

#define OPS_ACL_MEM_GRANULARITY_OPTIONS(X)                                             \
    X(ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, 0) X(ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, 1) \
    X(ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF, 0xFFFF)
ACL_ENUM(aclrtMemGranularityOptions, OPS_ACL_MEM_GRANULARITY_OPTIONS)

#define OPS_ACL_MEM_LOCATION_FIELDS(X, s) X(s, uint32_t, id) X(s, aclrtMemLocationType, type)
ACL_STRUCT(aclrtMemLocation, OPS_ACL_MEM_LOCATION_FIELDS)

#define OPS_ACL_PHYSICAL_MEM_PROP_FIELDS(X, s)                                         \
    X(s, aclrtMemHandleType, handleType) X(s, aclrtMemAllocationType, allocationType)  \
    X(s, aclrtMemAttr, memAttr) X(s, aclrtMemLocation, location) X(s, uint64_t, reserve)
ACL_STRUCT(aclrtPhysicalMemProp, OPS_ACL_PHYSICAL_MEM_PROP_FIELDS)

/* model run instances made by stream capture (aclmdlRICaptureBegin / End) */
ACL_TYPEDEF(void *, aclmdlRI)

#define OPS_ACL_CAPTURE_MODES(X)                                                       \
    X(ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, 0) X(ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL, 1) \
    X(ACL_MODEL_RI_CAPTURE_MODE_RELAXED, 2)
ACL_ENUM(aclmdlRICaptureMode, OPS_ACL_CAPTURE_MODES)

/* ---- aclnn/acl_meta.h ---- */
ACL_OPAQUE(aclTensor)
ACL_OPAQUE(aclScalar)
ACL_OPAQUE(aclIntArray)
ACL_OPAQUE(aclTensorList)
ACL_TYPEDEF(int32_t, aclnnStatus)

/* aclnn return codes (the "aclnn返回码" table; aclnn/opdev/op_errno.h). */
#define OPS_ACLNN_ERRORS(X)                                                            \
    X(ACLNN_SUCCESS, 0) X(ACLNN_ERR_PARAM_NULLPTR, 161001)                             \
    X(ACLNN_ERR_PARAM_INVALID, 161002) X(ACLNN_ERR_RUNTIME_ERROR, 361001)              \
    X(ACLNN_ERR_INNER, 561000) X(ACLNN_ERR_INNER_FIND_KERNEL_ERROR, 561003)            \
    X(ACLNN_ERR_INNER_NULLPTR, 561103)
ACL_CONSTS(OPS_ACLNN_ERRORS)

#endif /* OPS_ACL_TYPES_H */
