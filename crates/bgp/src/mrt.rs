//! MRT RIB dumps (RFC 6396): TABLE_DUMP_V2 with its PEER_INDEX_TABLE and
//! RIB_IPV4_UNICAST / RIB_IPV6_UNICAST records, and the older TABLE_DUMP.
//!
//! bgpkit-parser does the decoding. Its route iterator decodes only the AS
//! path of each route, not every attribute, and for TABLE_DUMP's 2-byte
//! AS numbers it merges AS4_PATH into AS_PATH (RFC 6793), so 4-byte ASNs
//! come out whole. TABLE_DUMP_V2 always carries 4-byte ASNs.

use std::io::Read;

use bgpkit_parser::models::{AsPath, AsPathSegment};
use bgpkit_parser::{BgpkitParser, ParserError, ParserErrorWithBytes};

use crate::collect::Collector;
use crate::error::Corruption;
use crate::path::PathHops;

/// Feeds every route of an MRT stream to `collector`.
pub(crate) fn read(reader: impl Read, collector: &mut Collector) -> Result<(), Corruption> {
    let mut hops = PathHops::default();
    for route in BgpkitParser::from_reader(reader).into_fallible_route_iter() {
        match route {
            Ok(route) => {
                fill(&mut hops, route.as_path.as_deref());
                collector.route(route.prefix.prefix, &hops);
            }
            Err(error) if breaks_framing(&error.error) => return Err(corruption(collector, error)),
            Err(_) => collector.skip_record(),
        }
    }
    Ok(())
}

fn fill(hops: &mut PathHops, path: Option<&AsPath>) {
    hops.clear();
    for segment in path.into_iter().flat_map(AsPath::iter_segments) {
        match segment {
            AsPathSegment::AsSequence(asns) => asns.iter().for_each(|&asn| hops.push(asn.into())),
            AsPathSegment::AsSet(_) => hops.push_set(),
            AsPathSegment::ConfedSequence(_) | AsPathSegment::ConfedSet(_) => hops.push_confederation(),
        }
    }
}

/// Whether the stream can no longer be split into records: it ended inside
/// one, could not be read or decompressed, or declared an absurd length.
/// Any other error spoils one record only, and reading goes on.
fn breaks_framing(error: &ParserError) -> bool {
    matches!(error, ParserError::IoError(_) | ParserError::EofError(_) | ParserError::OversizedRecord { .. })
}

fn corruption(collector: &Collector, error: ParserErrorWithBytes) -> Corruption {
    Corruption {
        at: format!("after route {} (near byte {} of the file)", collector.routes(), collector.bytes_read()),
        detail: format!("truncated or corrupt MRT data: {}", error.error),
    }
}
