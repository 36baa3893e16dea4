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
 * Only the enumerators the layer or the simulator use are listed; values are CANN's.
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
#else
#define ACL_OPAQUE(name) typedef struct name name;
#define ACL_TYPEDEF(type, name) typedef type name;
#define ACL_ENUM(name, list) typedef enum { list(OPS_ENUM_ITEM) } name;
#define ACL_CONSTS(list) enum { list(OPS_ENUM_ITEM) };
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
    X(ACL_ERROR_RT_INVALID_MEMORY_TYPE, 107016)                                        \
    X(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, 207000)                                        \
    X(ACL_ERROR_RT_MEMORY_ALLOCATION, 207001) X(ACL_ERROR_RT_MEMORY_FREE, 207002)      \
    X(ACL_ERROR_RT_INTERNAL_ERROR, 507000) X(ACL_ERROR_RT_EVENT_NOT_COMPLETE, 507006)  \
    X(ACL_ERROR_RT_AICORE_EXCEPTION, 507015)
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

#define OPS_ACL_MEM_ATTRS(X) X(ACL_DDR_MEM, 0) X(ACL_HBM_MEM, 1)
ACL_ENUM(aclrtMemAttr, OPS_ACL_MEM_ATTRS)

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
