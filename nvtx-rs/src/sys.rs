//! The NVTX v3 C ABI (from `nvToolsExt.h` and `nvtxDetail/nvtxTypes.h`,
//! NVTX 3.x as shipped with CUDA 13.0), written out by hand so that building
//! needs no C compiler. Enums are integer constants, as in C.

#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

use std::ffi::{c_char, c_int, c_void};

/// `NVTX_VERSION`.
pub const NVTX_VERSION: u16 = 3;

/// `nvtxDomainHandle_t`: opaque, chosen by the tool.
pub type nvtxDomainHandle_t = *mut c_void;
/// `nvtxStringHandle_t`: opaque, chosen by the tool.
pub type nvtxStringHandle_t = *mut c_void;
/// `nvtxRangeId_t`.
pub type nvtxRangeId_t = u64;

/// `nvtxMessageType_t`.
pub type nvtxMessageType_t = i32;
/// No message.
pub const NVTX_MESSAGE_UNKNOWN: nvtxMessageType_t = 0;
/// `const char*`.
pub const NVTX_MESSAGE_TYPE_ASCII: nvtxMessageType_t = 1;
/// `const wchar_t*` (UTF-32 on Linux).
pub const NVTX_MESSAGE_TYPE_UNICODE: nvtxMessageType_t = 2;
/// `nvtxStringHandle_t` from `nvtxDomainRegisterString*`.
pub const NVTX_MESSAGE_TYPE_REGISTERED: nvtxMessageType_t = 3;

/// `nvtxColorType_t`: ARGB.
pub const NVTX_COLOR_ARGB: i32 = 1;
/// `nvtxPayloadType_t` values.
pub const NVTX_PAYLOAD_UNKNOWN: i32 = 0;
/// Unsigned 64-bit payload.
pub const NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: i32 = 1;
/// Signed 64-bit payload.
pub const NVTX_PAYLOAD_TYPE_INT64: i32 = 2;
/// `double` payload.
pub const NVTX_PAYLOAD_TYPE_DOUBLE: i32 = 3;
/// Extended payloads (`nvToolsExtPayload.h`, `NVTX_PAYLOAD_TYPE_EXT`, once
/// `NVTX_PAYLOAD_TYPE_BINARY`): `payload` points to `reserved0`
/// [`nvtxPayloadData_t`]s.
pub const NVTX_PAYLOAD_TYPE_EXT: i32 = 0xDFBD_0009_u32 as i32;
/// Schema ids from here up are registered schemas (statically numbered by
/// their library, or given by the tool); below, predefined entry types.
pub const NVTX_PAYLOAD_SCHEMA_ID_STATIC_START: u64 = 1 << 24;

/// `nvtxPayloadData_t`: one extended payload, a blob laid out as schema
/// `schemaId` says.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct nvtxPayloadData_t {
    /// The schema (a registered id, or a predefined entry type).
    pub schemaId: u64,
    /// Size of the blob, bytes.
    pub size: usize,
    /// The blob.
    pub payload: *const c_void,
}

/// `nvtxMessageValue_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union nvtxMessageValue_t {
    /// ASCII.
    pub ascii: *const c_char,
    /// UTF-32.
    pub unicode: *const libc::wchar_t,
    /// Registered.
    pub registered: nvtxStringHandle_t,
}

/// `nvtxEventAttributes_v2`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct nvtxEventAttributes_t {
    /// `NVTX_VERSION`.
    pub version: u16,
    /// `sizeof(nvtxEventAttributes_t)`.
    pub size: u16,
    /// User category.
    pub category: u32,
    /// `nvtxColorType_t`.
    pub colorType: i32,
    /// ARGB.
    pub color: u32,
    /// `nvtxPayloadType_t`.
    pub payloadType: i32,
    /// Reserved.
    pub reserved0: i32,
    /// Payload bits (u64, i64 or f64 per `payloadType`).
    pub payload: u64,
    /// `nvtxMessageType_t`.
    pub messageType: nvtxMessageType_t,
    /// Message.
    pub message: nvtxMessageValue_t,
}

/// `NVTX_EVENT_ATTRIB_STRUCT_SIZE`.
pub const NVTX_EVENT_ATTRIB_STRUCT_SIZE: u16 = std::mem::size_of::<nvtxEventAttributes_t>() as u16;

/// `NvtxCallbackModule` values.
pub const NVTX_CB_MODULE_CORE: u32 = 1;
/// CUDA driver naming.
pub const NVTX_CB_MODULE_CUDA: u32 = 2;
/// OpenCL naming.
pub const NVTX_CB_MODULE_OPENCL: u32 = 3;
/// CUDA runtime naming.
pub const NVTX_CB_MODULE_CUDART: u32 = 4;
/// Domains.
pub const NVTX_CB_MODULE_CORE2: u32 = 5;
/// Sync user objects.
pub const NVTX_CB_MODULE_SYNC: u32 = 6;

/// `NvtxCallbackIdCore`: slot indexes of the CORE module.
pub mod core {
    #![allow(missing_docs)]
    pub const MarkEx: usize = 1;
    pub const MarkA: usize = 2;
    pub const MarkW: usize = 3;
    pub const RangeStartEx: usize = 4;
    pub const RangeStartA: usize = 5;
    pub const RangeStartW: usize = 6;
    pub const RangeEnd: usize = 7;
    pub const RangePushEx: usize = 8;
    pub const RangePushA: usize = 9;
    pub const RangePushW: usize = 10;
    pub const RangePop: usize = 11;
    pub const NameCategoryA: usize = 12;
    pub const NameCategoryW: usize = 13;
    pub const NameOsThreadA: usize = 14;
    pub const NameOsThreadW: usize = 15;
    /// `NVTX_CBID_CORE_SIZE`.
    pub const SIZE: usize = 16;
}

/// `NvtxCallbackIdCore2`: slot indexes of the CORE2 (domain) module.
pub mod core2 {
    #![allow(missing_docs)]
    pub const DomainMarkEx: usize = 1;
    pub const DomainRangeStartEx: usize = 2;
    pub const DomainRangeEnd: usize = 3;
    pub const DomainRangePushEx: usize = 4;
    pub const DomainRangePop: usize = 5;
    pub const DomainResourceCreate: usize = 6;
    pub const DomainResourceDestroy: usize = 7;
    pub const DomainNameCategoryA: usize = 8;
    pub const DomainNameCategoryW: usize = 9;
    pub const DomainRegisterStringA: usize = 10;
    pub const DomainRegisterStringW: usize = 11;
    pub const DomainCreateA: usize = 12;
    pub const DomainCreateW: usize = 13;
    pub const DomainDestroy: usize = 14;
    pub const Initialize: usize = 15;
    /// `NVTX_CBID_CORE2_SIZE`.
    pub const SIZE: usize = 16;
}

/// Slots in the other modules (naming CUDA/OpenCL objects, sync objects):
/// the emitter exposes them so tools can attach, but emits none.
pub const NVTX_CBID_CUDA_SIZE: usize = 9;
/// See [`NVTX_CBID_CUDA_SIZE`].
pub const NVTX_CBID_OPENCL_SIZE: usize = 15;
/// See [`NVTX_CBID_CUDA_SIZE`].
pub const NVTX_CBID_CUDART_SIZE: usize = 7;
/// See [`NVTX_CBID_CUDA_SIZE`].
pub const NVTX_CBID_SYNC_SIZE: usize = 7;

/// `NvtxExportTableID` values.
pub const NVTX_ETID_CALLBACKS: u32 = 1;
/// Version info table.
pub const NVTX_ETID_VERSIONINFO: u32 = 3;

/// `NvtxFunctionPointer`: an uncallable function pointer, cast before use.
pub type NvtxFunctionPointer = *mut c_void;
/// `NvtxFunctionTable`: an array of pointers to function-pointer slots.
pub type NvtxFunctionTable = *mut *mut NvtxFunctionPointer;

/// `NvtxExportTableCallbacks`.
#[repr(C)]
pub struct NvtxExportTableCallbacks {
    /// `sizeof(NvtxExportTableCallbacks)`.
    pub struct_size: usize,
    /// Returns the slot table of a module.
    pub GetModuleFunctionTable:
        Option<unsafe extern "C" fn(module: u32, out_table: *mut NvtxFunctionTable, out_size: *mut u32) -> c_int>,
}

/// `NvtxExportTableVersionInfo`.
#[repr(C)]
pub struct NvtxExportTableVersionInfo {
    /// `sizeof(NvtxExportTableVersionInfo)`.
    pub struct_size: usize,
    /// The NVTX API version of the emitting library.
    pub version: u32,
    /// Reserved.
    pub reserved0: u32,
    /// Tools report their version here.
    pub SetInjectionNvtxVersion: Option<unsafe extern "C" fn(version: u32)>,
}

/// `NvtxGetExportTableFunc_t`.
pub type NvtxGetExportTableFunc_t = unsafe extern "C" fn(export_table_id: u32) -> *const c_void;
/// `NvtxInitializeInjectionNvtxFunc_t`: `InitializeInjectionNvtx2`'s type.
pub type NvtxInitializeInjectionNvtxFunc_t = unsafe extern "C" fn(get_export_table: NvtxGetExportTableFunc_t) -> c_int;

/// Function types of the slots the emitter calls and the tool fills.
pub mod fn_types {
    #![allow(missing_docs)]
    use super::*;
    pub type MarkEx = unsafe extern "C" fn(*const nvtxEventAttributes_t);
    pub type MarkA = unsafe extern "C" fn(*const c_char);
    pub type MarkW = unsafe extern "C" fn(*const libc::wchar_t);
    pub type RangeStartEx = unsafe extern "C" fn(*const nvtxEventAttributes_t) -> nvtxRangeId_t;
    pub type RangeStartA = unsafe extern "C" fn(*const c_char) -> nvtxRangeId_t;
    pub type RangeStartW = unsafe extern "C" fn(*const libc::wchar_t) -> nvtxRangeId_t;
    pub type RangeEnd = unsafe extern "C" fn(nvtxRangeId_t);
    pub type RangePushEx = unsafe extern "C" fn(*const nvtxEventAttributes_t) -> c_int;
    pub type RangePushA = unsafe extern "C" fn(*const c_char) -> c_int;
    pub type RangePushW = unsafe extern "C" fn(*const libc::wchar_t) -> c_int;
    pub type RangePop = unsafe extern "C" fn() -> c_int;
    pub type NameCategoryA = unsafe extern "C" fn(u32, *const c_char);
    pub type NameCategoryW = unsafe extern "C" fn(u32, *const libc::wchar_t);
    pub type NameOsThreadA = unsafe extern "C" fn(u32, *const c_char);
    pub type NameOsThreadW = unsafe extern "C" fn(u32, *const libc::wchar_t);
    pub type DomainMarkEx = unsafe extern "C" fn(nvtxDomainHandle_t, *const nvtxEventAttributes_t);
    pub type DomainRangeStartEx =
        unsafe extern "C" fn(nvtxDomainHandle_t, *const nvtxEventAttributes_t) -> nvtxRangeId_t;
    pub type DomainRangeEnd = unsafe extern "C" fn(nvtxDomainHandle_t, nvtxRangeId_t);
    pub type DomainRangePushEx = unsafe extern "C" fn(nvtxDomainHandle_t, *const nvtxEventAttributes_t) -> c_int;
    pub type DomainRangePop = unsafe extern "C" fn(nvtxDomainHandle_t) -> c_int;
    pub type DomainNameCategoryA = unsafe extern "C" fn(nvtxDomainHandle_t, u32, *const c_char);
    pub type DomainNameCategoryW = unsafe extern "C" fn(nvtxDomainHandle_t, u32, *const libc::wchar_t);
    pub type DomainRegisterStringA = unsafe extern "C" fn(nvtxDomainHandle_t, *const c_char) -> nvtxStringHandle_t;
    pub type DomainRegisterStringW =
        unsafe extern "C" fn(nvtxDomainHandle_t, *const libc::wchar_t) -> nvtxStringHandle_t;
    pub type DomainCreateA = unsafe extern "C" fn(*const c_char) -> nvtxDomainHandle_t;
    pub type DomainCreateW = unsafe extern "C" fn(*const libc::wchar_t) -> nvtxDomainHandle_t;
    pub type DomainDestroy = unsafe extern "C" fn(nvtxDomainHandle_t);
    pub type Initialize = unsafe extern "C" fn(*const c_void);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_attributes_match_the_c_layout() {
        // nvtxEventAttributes_v2 is 48 bytes on LP64, message at offset 40.
        assert_eq!(std::mem::size_of::<nvtxEventAttributes_t>(), 48);
        assert_eq!(std::mem::offset_of!(nvtxEventAttributes_t, payload), 24);
        assert_eq!(std::mem::offset_of!(nvtxEventAttributes_t, messageType), 32);
        assert_eq!(std::mem::offset_of!(nvtxEventAttributes_t, message), 40);
        assert_eq!(std::mem::size_of::<nvtxPayloadData_t>(), 24);
    }
}
