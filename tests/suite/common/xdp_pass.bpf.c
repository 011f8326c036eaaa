// Passes every packet up: on the client's end of a veth pair, so that the
// server's XDP_TX replies are delivered (veth hands XDP_TX frames only to a
// peer that runs XDP itself). No headers: 2 is XDP_PASS (<linux/bpf.h>).
__attribute__((section("xdp"), used)) int pass(void *context) {
    return 2;
}

__attribute__((section("license"), used)) char _license[] = "GPL";
