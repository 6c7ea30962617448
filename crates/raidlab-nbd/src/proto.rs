//! The NBD wire format: constants, and pure functions that parse what a client
//! sends and encode what the server answers. Every integer on the wire is
//! big-endian (network byte order); this is the only module that knows it.
//!
//! Names follow the protocol document (`doc/proto.md` of NetworkBlockDevice/nbd)
//! without the `NBD_` prefix. Nothing here does I/O.

/// `NBDMAGIC`, the first eight bytes the server sends.
pub const INIT_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: newstyle negotiation, and the prefix of every client option.
pub const OPTS_MAGIC: u64 = 0x4948_4156_454f_5054;
/// Prefix of every option reply.
pub const REP_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flags (server, 16 bits).
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flags (32 bits).
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;

/// Option reply types.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
const REP_ERR: u32 = 1 << 31;
pub const REP_ERR_UNSUP: u32 = REP_ERR | 1;
pub const REP_ERR_POLICY: u32 = REP_ERR | 2;
pub const REP_ERR_INVALID: u32 = REP_ERR | 3;
pub const REP_ERR_TLS_REQD: u32 = REP_ERR | 5;
pub const REP_ERR_UNKNOWN: u32 = REP_ERR | 6;
pub const REP_ERR_TOO_BIG: u32 = REP_ERR | 9;

/// Information types in `REP_INFO` replies to `OPT_INFO` / `OPT_GO`.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Transmission flags (16 bits).
pub const TF_HAS_FLAGS: u16 = 1 << 0;
pub const TF_READ_ONLY: u16 = 1 << 1;
pub const TF_SEND_FLUSH: u16 = 1 << 2;
pub const TF_SEND_FUA: u16 = 1 << 3;
pub const TF_SEND_TRIM: u16 = 1 << 5;
pub const TF_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TF_CAN_MULTI_CONN: u16 = 1 << 8;

/// Command flags.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;

/// Commands.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;

/// Structured reply chunk flags and types.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) | 1;

/// Error values carried in replies (fixed by the protocol, not the host's errno).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// Strings (names, messages) longer than this are refused by the protocol.
pub const MAX_STRING: usize = 4096;

/// Bytes in the header of an option the client sends (magic, option, length).
pub const OPTION_HEADER_LEN: usize = 16;
/// Bytes in a transmission request header.
pub const REQUEST_LEN: usize = 28;

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// The header of one client option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    pub magic: u64,
    pub option: u32,
    pub length: u32,
}

pub fn parse_option_header(b: &[u8; OPTION_HEADER_LEN]) -> OptionHeader {
    OptionHeader {
        magic: be64(&b[0..8]),
        option: be32(&b[8..12]),
        length: be32(&b[12..16]),
    }
}

/// `OPT_INFO` / `OPT_GO` payload: an export name and the information the client
/// asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    pub name: String,
    pub requests: Vec<u16>,
}

/// Parse an `OPT_INFO` / `OPT_GO` payload. `None` when its lengths disagree with
/// the option's length or the name is not UTF-8 (the server answers
/// `REP_ERR_INVALID`).
pub fn parse_info_request(data: &[u8]) -> Option<InfoRequest> {
    if data.len() < 4 {
        return None;
    }
    let name_len = be32(&data[0..4]) as usize;
    let rest = &data[4..];
    if name_len > MAX_STRING || rest.len() < name_len + 2 {
        return None;
    }
    let name = std::str::from_utf8(&rest[..name_len]).ok()?.to_string();
    let rest = &rest[name_len..];
    let count = be16(&rest[0..2]) as usize;
    let list = &rest[2..];
    if list.len() != count * 2 {
        return None;
    }
    let requests = list.chunks_exact(2).map(be16).collect();
    Some(InfoRequest { name, requests })
}

/// One transmission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub magic: u32,
    pub flags: u16,
    pub kind: u16,
    pub cookie: u64,
    pub offset: u64,
    pub length: u32,
}

pub fn parse_request(b: &[u8; REQUEST_LEN]) -> Request {
    Request {
        magic: be32(&b[0..4]),
        flags: be16(&b[4..6]),
        kind: be16(&b[6..8]),
        cookie: be64(&b[8..16]),
        offset: be64(&b[16..24]),
        length: be32(&b[24..28]),
    }
}

pub fn encode_request(r: &Request) -> [u8; REQUEST_LEN] {
    let mut b = [0u8; REQUEST_LEN];
    b[0..4].copy_from_slice(&r.magic.to_be_bytes());
    b[4..6].copy_from_slice(&r.flags.to_be_bytes());
    b[6..8].copy_from_slice(&r.kind.to_be_bytes());
    b[8..16].copy_from_slice(&r.cookie.to_be_bytes());
    b[16..24].copy_from_slice(&r.offset.to_be_bytes());
    b[24..28].copy_from_slice(&r.length.to_be_bytes());
    b
}

/// The server's first 18 bytes: magic, `IHAVEOPT`, handshake flags.
pub fn encode_greeting(flags: u16) -> [u8; 18] {
    let mut b = [0u8; 18];
    b[0..8].copy_from_slice(&INIT_MAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&OPTS_MAGIC.to_be_bytes());
    b[16..18].copy_from_slice(&flags.to_be_bytes());
    b
}

/// An option reply: header plus `data`.
pub fn encode_option_reply(option: u32, reply: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&REP_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&reply.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// `INFO_EXPORT` payload: size and transmission flags.
pub fn info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut b = INFO_EXPORT.to_be_bytes().to_vec();
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b
}

/// `INFO_BLOCK_SIZE` payload: minimum, preferred and maximum block sizes.
pub fn info_block_size(min: u32, preferred: u32, max: u32) -> Vec<u8> {
    let mut b = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
    for v in [min, preferred, max] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b
}

/// `INFO_NAME` or `INFO_DESCRIPTION` payload.
pub fn info_string(kind: u16, s: &str) -> Vec<u8> {
    let mut b = kind.to_be_bytes().to_vec();
    b.extend_from_slice(truncate(s).as_bytes());
    b
}

/// `REP_SERVER` payload for `OPT_LIST`: one export name.
pub fn list_entry(name: &str) -> Vec<u8> {
    let mut b = (name.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(name.as_bytes());
    b
}

/// Cut a message to the protocol's string limit at a character boundary.
pub fn truncate(s: &str) -> &str {
    if s.len() <= MAX_STRING {
        return s;
    }
    let mut end = MAX_STRING;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A simple reply header (data for a successful read follows it).
pub fn simple_reply(error: u32, cookie: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b
}

/// A structured reply chunk header for a payload of `length` bytes.
pub fn structured_header(flags: u16, kind: u16, cookie: u64, length: u32) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&kind.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b[16..20].copy_from_slice(&length.to_be_bytes());
    b
}

/// A final structured error chunk with a message for a person.
pub fn structured_error(cookie: u64, error: u32, message: &str) -> Vec<u8> {
    let msg = truncate(message).as_bytes();
    let mut b = structured_header(
        REPLY_FLAG_DONE,
        REPLY_TYPE_ERROR,
        cookie,
        (6 + msg.len()) as u32,
    )
    .to_vec();
    b.extend_from_slice(&error.to_be_bytes());
    b.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    b.extend_from_slice(msg);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips_big_endian() {
        let r = Request {
            magic: REQUEST_MAGIC,
            flags: CMD_FLAG_FUA,
            kind: CMD_WRITE,
            cookie: 0x0102_0304_0506_0708,
            offset: 1 << 40,
            length: 4096,
        };
        let b = encode_request(&r);
        assert_eq!(&b[0..4], &[0x25, 0x60, 0x95, 0x13]);
        assert_eq!(&b[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(parse_request(&b), r);
    }

    #[test]
    fn info_request_lengths_must_agree() {
        let mut d = 3u32.to_be_bytes().to_vec();
        d.extend_from_slice(b"abc");
        d.extend_from_slice(&1u16.to_be_bytes());
        d.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        assert_eq!(
            parse_info_request(&d),
            Some(InfoRequest {
                name: "abc".into(),
                requests: vec![INFO_BLOCK_SIZE]
            })
        );
        // One byte short, one byte long, a name longer than the option.
        assert_eq!(parse_info_request(&d[..d.len() - 1]), None);
        let mut long = d.clone();
        long.push(0);
        assert_eq!(parse_info_request(&long), None);
        let mut lying = 1000u32.to_be_bytes().to_vec();
        lying.extend_from_slice(&d[4..]);
        assert_eq!(parse_info_request(&lying), None);
        assert_eq!(parse_info_request(&[0, 0]), None);
    }

    #[test]
    fn option_reply_and_error_chunk_layout() {
        let r = encode_option_reply(OPT_GO, REP_ERR_UNKNOWN, b"xy");
        assert_eq!(r.len(), 22);
        assert_eq!(&r[0..8], &REP_MAGIC.to_be_bytes());
        assert_eq!(&r[12..16], &[0x80, 0, 0, 6]);
        let e = structured_error(9, EIO, "boom");
        assert_eq!(&e[16..20], &10u32.to_be_bytes());
        assert_eq!(&e[20..24], &EIO.to_be_bytes());
        assert_eq!(&e[24..26], &4u16.to_be_bytes());
        assert_eq!(&e[26..], b"boom");
        let long = "é".repeat(MAX_STRING);
        assert!(truncate(&long).len() <= MAX_STRING);
    }
}
