//! Compiles the XDP program (bpf/answer.bpf.c) with clang into OUT_DIR,
//! where src/lib.rs embeds it, and sets `pharos_xdp_program` when it did
//! (pharos-bpf-build says why when it did not).

fn main() {
    pharos_bpf_build::compile("bpf/answer.bpf.c", "answer.bpf.o", "pharos_xdp_program", "pharos-xdp: the kernel fast path (XDP)");
}
