//! Re-exports blazesym's C API so that its `#[no_mangle]` functions land in one static
//! library the C build links.
pub use blazesym_c;
