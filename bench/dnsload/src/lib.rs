//! dnsload's query files and their wire encoding ([`query`]), shared with
//! bench/xdpgen so both generators send the same queries from the same
//! mix files.

pub mod query;
