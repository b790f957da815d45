//! The Rust libraries lockscope links, in one static library: blazesym's C API (its
//! `#[no_mangle]` functions, re-exported) and a C entry point into inferno's flame graph
//! renderer.
pub use blazesym_c;

use std::ffi::{c_char, c_int, CStr};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;

use inferno::flamegraph::{self, color::BasicPalette, Options, Palette};

fn c_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the C caller passes NUL-terminated strings that outlive the call.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

/// Renders `folded` (collapsed stacks: "root;...;leaf WEIGHT" per line) as an SVG flame
/// graph into `fd`, which stays open. `title` heads it; `count_name` names the weight in
/// the tooltips ("ns"). Returns 0, -EINVAL for input that is not UTF-8 or has no stacks,
/// or -errno when writing fails.
#[no_mangle]
pub extern "C" fn ls_flamegraph_svg(
    folded: *const c_char,
    title: *const c_char,
    count_name: *const c_char,
    fd: c_int,
) -> c_int {
    const EINVAL: c_int = 22;
    const EIO: c_int = 5;
    let Some(text) = c_str(folded) else { return -EINVAL };
    let mut opts = Options::default();
    // waiting is off-CPU time: the blue palette of off-CPU flame graphs
    opts.colors = Palette::Basic(BasicPalette::Io);
    // the same input renders the same file (tests and diffs)
    opts.deterministic = true;
    if let Some(t) = c_str(title) {
        opts.title = t.to_string();
    }
    if let Some(c) = c_str(count_name) {
        opts.count_name = c.to_string();
    }
    // SAFETY: the caller owns fd; ManuallyDrop leaves it open.
    let file = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
    let mut out = BufWriter::new(&*file);
    let res = flamegraph::from_lines(&mut opts, text.lines(), &mut out).and_then(|_| out.flush());
    match res {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => -EINVAL,
        Err(e) => -e.raw_os_error().unwrap_or(EIO),
    }
}
