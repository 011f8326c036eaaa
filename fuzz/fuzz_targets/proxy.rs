//! Input through the PROXY protocol header parser (`pharos_wire::proxy`),
//! as a stream's first octets and as a datagram. Invariants: no panic; a
//! header read is no longer than the input, nor than its version allows;
//! every proper prefix of a header is incomplete (a header ends where it
//! says, never earlier); a datagram's header is the stream reading's,
//! version 2 only; what parses as a header announces itself as one.
#![no_main]

use pharos_wire::proxy::{Announced, Parsed, ProxyError, V2_MAX, V2_SIGNATURE, announces, parse, parse_datagram};

/// The longest version 1 header, CRLF included.
const V1_MAX: usize = 107;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let parsed = parse(data);
    if let Ok(Parsed::Header(header)) = parsed {
        assert!(header.length <= data.len(), "{header:?} is longer than the input");
        let longest = if data.starts_with(V2_SIGNATURE) { V2_MAX } else { V1_MAX };
        assert!(header.length <= longest, "{header:?} is longer than its version allows");
        assert_eq!(announces(data), Announced::Header, "{header:?} does not announce itself");
        for end in 0..header.length {
            assert_eq!(parse(&data[..end]), Ok(Parsed::Incomplete), "{end} octets of {header:?}");
        }
        assert_eq!(parse(&data[..header.length]), parsed, "the header alone");
    }
    match (parse_datagram(data), parsed) {
        (Ok(header), Ok(Parsed::Header(read))) => {
            assert_eq!(header, read, "a datagram's header is the stream's");
            assert!(data.starts_with(V2_SIGNATURE), "{header:?} from a datagram not of version 2");
        }
        (Ok(header), other) => panic!("{header:?} from a datagram, {other:?} from a stream"),
        (Err(ProxyError::Truncated), other) => assert_eq!(other, Ok(Parsed::Incomplete)),
        (Err(_), _) => {}
    }
});
