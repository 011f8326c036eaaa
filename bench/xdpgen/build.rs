//! Compiles xdpgen's XDP program (bpf/xdpgen.bpf.c) with clang into
//! OUT_DIR, where src/kernel.rs embeds it, and sets `xdpgen_program`
//! when it did (pharos-bpf-build says why when it did not).

fn main() {
    pharos_bpf_build::compile("bpf/xdpgen.bpf.c", "xdpgen.bpf.o", "xdpgen_program", "xdpgen: its XDP programs");
}
