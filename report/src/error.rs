//! gpuscope's error type: what failed, with the CUPTI code when there is one.

use std::fmt;

/// What kind of failure an [`Error`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// `libcupti` or `libcuda` could not be loaded, or lacks a symbol.
    LibraryNotFound,
    /// Another tool (Nsight, torch.profiler, ...) already holds CUPTI.
    CuptiBusy,
    /// A CUPTI call failed; [`Error::cupti_code`] has the code.
    Cupti,
    /// No NVIDIA driver or no GPU.
    NoDevice,
    /// A session is already running in this process.
    SessionActive,
    /// No session is running (stop, snapshot or flush without one).
    NotRunning,
    /// An option or environment value is out of range.
    InvalidConfig,
    /// Writing a report failed.
    Io,
    /// Reading performance counters is not permitted for this user.
    NoPermission,
    /// The GPU, its configuration or this process cannot do what was asked
    /// (a mode the GPU lacks, a report from a newer gpuscope).
    Unsupported,
    /// The GPU's performance counters are in use by another profiler
    /// (Nsight Compute, DCGM profiling, gpuscope in another process).
    CountersBusy,
}

/// An error from gpuscope.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    cupti_code: Option<u32>,
}

impl Error {
    /// A new error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), cupti_code: None }
    }

    #[doc(hidden)]
    pub fn cupti(code: u32, message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Cupti, message: message.into(), cupti_code: Some(code) }
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The human-readable explanation, with the fix where there is one.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `CUptiResult` code, for [`ErrorKind::Cupti`].
    pub fn cupti_code(&self) -> Option<u32> {
        self.cupti_code
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::new(ErrorKind::Io, e.to_string())
    }
}

/// `Result` with gpuscope's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
