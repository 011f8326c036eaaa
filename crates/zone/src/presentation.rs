//! A pass over zone-file text for the two things the `domain` parser does
//! not do, run before it:
//!
//! - LOC records (RFC 1876): the parser has no LOC scanner, so their data
//!   is rewritten into RFC 3597 generic form (`\# 16 <hex>`), which it
//!   accepts for any type;
//! - a free-standing `@` in record data, which RFC 1035 section 5.1 makes
//!   the current origin but the parser reads as a label named "@": it is
//!   replaced by the origin, tracked through `$ORIGIN`.
//!
//! It also refuses a '(' that is never closed and ends the text with a line
//! break: the parser can fail badly on either (found by fuzzing).
//!
//! Line breaks are kept, so error messages still point at the right line,
//! and the pass notes the line each entry starts on: the parser's own
//! offset lags behind after some records (after an SOA it still points
//! into the SOA's line), so it cannot say where the next entry begins.

/// Record types whose data holds domain names where `@` may stand.
const TYPES_WITH_NAMES: [&str; 12] = ["NS", "CNAME", "DNAME", "PTR", "MX", "SRV", "SOA", "RP", "NAPTR", "SVCB", "HTTPS", "MINFO"];

/// Zone-file text ready for the parser, with where its entries start.
#[derive(Debug)]
pub struct Rewritten {
    pub text: String,
    /// The line each entry the parser returns starts on, in order: records
    /// and `$INCLUDE`s, not the `$TTL` and `$ORIGIN` it takes in passing,
    /// nor blank lines and comments.
    pub entry_lines: Vec<usize>,
}

/// Rewrites LOC data and `@` in record data. `origin` is the absolute
/// origin the file starts with, in presentation format ("example.test.").
/// Errors carry the line number of the bad record.
pub fn rewrite(text: &str, origin: &str) -> Result<Rewritten, (usize, String)> {
    let mut origin = origin.to_string();
    let mut out = String::with_capacity(text.len());
    let mut entry_lines = Vec::new();
    let mut entry = String::new();
    let mut depth = 0i32;
    let mut entry_line = 1;
    for (line_number, line) in (1..).zip(text.split_inclusive('\n')) {
        if entry.is_empty() {
            entry_line = line_number;
        }
        entry.push_str(line);
        depth += paren_balance(line);
        if depth <= 0 {
            if is_parsed_as_entry(&entry) {
                entry_lines.push(entry_line);
            }
            out.push_str(&rewrite_entry(&entry, &mut origin).map_err(|message| (entry_line, message))?);
            entry.clear();
            depth = 0;
        }
    }
    if depth > 0 {
        return Err((entry_line, "a '(' is never closed".into()));
    }
    if is_parsed_as_entry(&entry) {
        entry_lines.push(entry_line);
    }
    out.push_str(&rewrite_entry(&entry, &mut origin).map_err(|message| (entry_line, message))?);
    // The parser has read past the end of a last line with no line break.
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(Rewritten { text: out, entry_lines })
}

/// Whether the parser returns this entry (a record, an `$INCLUDE` or a
/// directive it refuses) rather than taking it in passing.
fn is_parsed_as_entry(entry: &str) -> bool {
    match tokens(entry).first() {
        None => false,
        Some((_, first)) => !["$TTL", "$ORIGIN"].iter().any(|directive| first.eq_ignore_ascii_case(directive)),
    }
}

/// Net count of parentheses outside quotes and comments.
fn paren_balance(line: &str) -> i32 {
    let mut balance = 0;
    let mut quoted = false;
    let mut escaped = false;
    for ch in line.chars() {
        match ch {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ';' if !quoted => break,
            '(' if !quoted => balance += 1,
            ')' if !quoted => balance -= 1,
            _ => {}
        }
    }
    balance
}

/// Splits an entry into tokens with their byte offsets, dropping comments
/// and parentheses. Quoted strings stay single tokens.
fn tokens(entry: &str) -> Vec<(usize, &str)> {
    let mut found = Vec::new();
    let bytes = entry.as_bytes();
    let mut pos = 0;
    while pos < bytes.len() {
        match bytes[pos] {
            b' ' | b'\t' | b'\r' | b'\n' | b'(' | b')' => pos += 1,
            b';' => {
                while pos < bytes.len() && bytes[pos] != b'\n' {
                    pos += 1;
                }
            }
            _ => {
                let start = pos;
                let mut quoted = false;
                while pos < bytes.len() {
                    match bytes[pos] {
                        b'\\' => pos += 1,
                        b'"' => quoted = !quoted,
                        b' ' | b'\t' | b'\r' | b'\n' | b'(' | b')' | b';' if !quoted => break,
                        _ => {}
                    }
                    pos += 1;
                }
                found.push((start, &entry[start..pos.min(bytes.len())]));
            }
        }
    }
    found
}

fn is_ttl(token: &str) -> bool {
    token.chars().next().is_some_and(|ch| ch.is_ascii_digit()) && token.chars().all(|ch| ch.is_ascii_digit() || "sSmMhHdDwW".contains(ch))
}

fn is_class(token: &str) -> bool {
    ["IN", "CH", "HS", "CS", "ANY"].iter().any(|class| token.eq_ignore_ascii_case(class))
}

fn rewrite_entry(entry: &str, origin: &mut String) -> Result<String, String> {
    let tokens = tokens(entry);
    let has_owner = !entry.starts_with([' ', '\t']);
    match tokens.first() {
        None => return Ok(entry.to_string()),
        Some((_, directive)) if directive.eq_ignore_ascii_case("$ORIGIN") => {
            if let Some((_, name)) = tokens.get(1) {
                *origin = if name.ends_with('.') { name.to_string() } else { format!("{name}.{origin}") };
            }
            return Ok(entry.to_string());
        }
        Some((_, directive)) if directive.starts_with('$') => return Ok(entry.to_string()),
        Some(_) => {}
    }
    let mut index = usize::from(has_owner);
    while index < tokens.len() && index < usize::from(has_owner) + 2 && (is_ttl(tokens[index].1) || is_class(tokens[index].1)) {
        index += 1;
    }
    let Some(&(type_at, rtype)) = tokens.get(index) else { return Ok(entry.to_string()) };
    if tokens.get(index + 1).is_some_and(|(_, token)| *token == "\\#") {
        return Ok(entry.to_string());
    }
    if TYPES_WITH_NAMES.iter().any(|with_names| rtype.eq_ignore_ascii_case(with_names)) {
        return Ok(expand_at_signs(entry, &tokens[index + 1..], origin));
    }
    if !rtype.eq_ignore_ascii_case("LOC") {
        return Ok(entry.to_string());
    }
    let fields: Vec<&str> = tokens[index + 1..].iter().map(|(_, token)| *token).collect();
    let rdata = encode_loc(&fields)?;
    let hex: String = rdata.iter().map(|byte| format!("{byte:02x}")).collect();
    let newlines = entry[type_at..].matches('\n').count().max(1);
    Ok(format!("{}LOC \\# {} {hex}{}", &entry[..type_at], rdata.len(), "\n".repeat(newlines)))
}

/// Replaces every record-data token that is a lone `@` with the origin.
fn expand_at_signs(entry: &str, data_tokens: &[(usize, &str)], origin: &str) -> String {
    let mut expanded = entry.to_string();
    for &(at, _) in data_tokens.iter().rev().filter(|(_, token)| *token == "@") {
        expanded.replace_range(at..at + 1, origin);
    }
    expanded
}

/// Encodes LOC fields (`d [m [s]] N|S d [m [s]] E|W alt[m] [siz [hp [vp]]]`)
/// into the 16 octets of RFC 1876 section 2.
fn encode_loc(fields: &[&str]) -> Result<[u8; 16], String> {
    let mut rest = fields;
    let latitude = angle(&mut rest, 'N', 'S', 90)?;
    let longitude = angle(&mut rest, 'E', 'W', 180)?;
    let altitude = meters(rest.first().ok_or("LOC record without altitude")?, -100_000.0, 42_849_672.95)?;
    let size = meters(rest.get(1).unwrap_or(&"1m"), 0.0, 90_000_000.0)?;
    let horizontal = meters(rest.get(2).unwrap_or(&"10000m"), 0.0, 90_000_000.0)?;
    let vertical = meters(rest.get(3).unwrap_or(&"10m"), 0.0, 90_000_000.0)?;
    if rest.len() > 4 {
        return Err(format!("LOC record has extra field {:?}", rest[4]));
    }
    let mut wire = [0u8; 16];
    wire[1] = precision(size);
    wire[2] = precision(horizontal);
    wire[3] = precision(vertical);
    wire[4..8].copy_from_slice(&latitude.to_be_bytes());
    wire[8..12].copy_from_slice(&longitude.to_be_bytes());
    let altitude_cm = (altitude * 100.0).round() as i64 + 10_000_000;
    wire[12..16].copy_from_slice(&(altitude_cm as u32).to_be_bytes());
    Ok(wire)
}

/// Reads degrees, optional minutes and seconds, then the hemisphere letter;
/// returns thousandths of an arc second offset by 2^31.
fn angle(rest: &mut &[&str], positive: char, negative: char, max_degrees: u32) -> Result<u32, String> {
    let mut parts = Vec::new();
    loop {
        let (token, tail) = rest.split_first().ok_or("LOC record ends inside a coordinate")?;
        *rest = tail;
        let hemisphere = token.chars().next().filter(|_| token.len() == 1).map(|ch| ch.to_ascii_uppercase());
        if hemisphere == Some(positive) || hemisphere == Some(negative) {
            let [degrees, minutes, seconds] = [0, 1, 2].map(|index| parts.get(index).copied().unwrap_or(0.0));
            if parts.is_empty() || degrees > max_degrees as f64 || minutes >= 60.0 || seconds >= 60.0 {
                return Err(format!("LOC coordinate {parts:?} {token} is out of range"));
            }
            let thousandths = ((degrees * 3600.0 + minutes * 60.0 + seconds) * 1000.0).round() as i64;
            let signed = if hemisphere == Some(positive) { thousandths } else { -thousandths };
            return Ok((signed + (1i64 << 31)) as u32);
        }
        if parts.len() == 3 {
            return Err(format!("LOC coordinate: expected {positive} or {negative}, found {token:?}"));
        }
        parts.push(token.parse::<f64>().map_err(|_| format!("LOC coordinate: {token:?} is not a number"))?);
    }
}

fn meters(token: &str, min: f64, max: f64) -> Result<f64, String> {
    let number = token.strip_suffix(['m', 'M']).unwrap_or(token);
    let value: f64 = number.parse().map_err(|_| format!("LOC: {token:?} is not a distance in meters"))?;
    if !(min..=max).contains(&value) {
        return Err(format!("LOC: {token} is out of range"));
    }
    Ok(value)
}

/// RFC 1876's size encoding: a digit times a power of ten centimeters.
fn precision(meters: f64) -> u8 {
    let mut centimeters = (meters * 100.0).round() as u64;
    let mut exponent = 0u8;
    while centimeters >= 10 && exponent < 9 {
        centimeters /= 10;
        exponent += 1;
    }
    (centimeters as u8) << 4 | exponent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_the_rfc_1876_example() {
        // RFC 1876 section 4: cambridge-net.kei.com's location.
        let wire = encode_loc(&["42", "21", "54", "N", "71", "06", "18", "W", "-24m", "30m"]).unwrap();
        assert_eq!(wire[..4], [0, 0x33, 0x16, 0x13]);
        assert_eq!(u32::from_be_bytes(wire[4..8].try_into().unwrap()), (1u32 << 31) + 152_514_000);
        assert_eq!(u32::from_be_bytes(wire[8..12].try_into().unwrap()), (1u32 << 31) - 255_978_000);
        assert_eq!(u32::from_be_bytes(wire[12..16].try_into().unwrap()), 10_000_000 - 2400);
    }

    #[test]
    fn rewrites_loc_and_leaves_other_records() {
        let text = "loc IN A 192.0.2.1\nhere 300 IN LOC ( 52 22 23.000 N\n 4 53 32.000 E -2.00m )\n";
        let rewritten = rewrite(text, "example.").unwrap().text;
        let lines: Vec<&str> = rewritten.lines().collect();
        assert_eq!(lines[0], "loc IN A 192.0.2.1");
        assert!(lines[1].starts_with("here 300 IN LOC \\# 16 00"), "{rewritten}");
        assert_eq!(rewritten.matches('\n').count(), 3, "line count kept");
    }

    #[test]
    fn reports_bad_loc_with_its_line() {
        let err = rewrite("a A 192.0.2.1\nb LOC 95 N 1 E 0m\n", "example.").unwrap_err();
        assert_eq!(err.0, 2);
    }

    #[test]
    fn notes_the_line_of_each_entry_the_parser_returns() {
        let text = "$TTL 300\n@ SOA ns h ( 1\n 2 3 4 5 )\n\n; note\n  NS ns\n$ORIGIN sub\n$INCLUDE part\nwww A 192.0.2.1";
        assert_eq!(rewrite(text, "example.").unwrap().entry_lines, [2, 6, 8, 9]);
    }

    #[test]
    fn expands_at_in_names_following_origin_changes() {
        let text = "www CNAME @\n$ORIGIN sub\n@ MX 10 @\nt TXT @ \"@\"\n";
        let rewritten = rewrite(text, "example.").unwrap().text;
        assert_eq!(rewritten, "www CNAME example.\n$ORIGIN sub\n@ MX 10 sub.example.\nt TXT @ \"@\"\n");
    }
}
