//! Device image files (helper in progress).
