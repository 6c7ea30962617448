//! Property tests: random and mutated byte streams fed to the server from memory.
//! Whatever arrives, the server returns (no panic, no hang), a read-only export is
//! never changed, and no byte outside the export is ever touched.

use proptest::prelude::*;
use raidlab_core::{SliceVolume, Volume};
use raidlab_devices::MemVolume;
use raidlab_nbd::proto::*;
use raidlab_nbd::{Export, Limits, Server};
use std::io::Cursor;
use std::sync::{mpsc, Arc};
use std::time::Duration;

const EXPORT: u64 = 64 << 10;
const GUARD: u64 = 4096;

/// An export that is a window of a larger memory volume, so writes outside the
/// export would show in the guard bytes around it.
fn setup(read_only: bool) -> (Arc<MemVolume>, Arc<Server>) {
    let backing = Arc::new(MemVolume::new(EXPORT + 2 * GUARD));
    let pattern: Vec<u8> = (0..EXPORT + 2 * GUARD).map(|i| (i % 251) as u8).collect();
    backing.write_at(&pattern, 0).unwrap();
    let window = SliceVolume::new(backing.clone(), GUARD, EXPORT).unwrap();
    let export = Export {
        name: "a".into(),
        description: String::new(),
        volume: Arc::new(window),
        read_only,
        preferred_block: 4096,
        multi_conn: true,
    };
    let limits = Limits {
        max_payload: 16 << 10,
        max_inflight_bytes: 64 << 10,
        workers: 3,
        ..Limits::default()
    };
    (
        backing,
        Arc::new(Server::new(vec![export], limits, Box::new(|_| {}))),
    )
}

/// Serve `input` on another thread; fail if it does not end within 10 s.
fn serve(server: Arc<Server>, input: Vec<u8>) -> Vec<u8> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        server.serve(Cursor::new(input), &mut out);
        let _ = tx.send(out);
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the server hung or panicked on this input")
}

fn option(opt: u32, data: &[u8]) -> Vec<u8> {
    let mut b = OPTS_MAGIC.to_be_bytes().to_vec();
    b.extend_from_slice(&opt.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// Client flags, structured replies, GO "a".
fn handshake() -> Vec<u8> {
    let mut b = (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES)
        .to_be_bytes()
        .to_vec();
    b.extend(option(OPT_STRUCTURED_REPLY, &[]));
    let mut go = 1u32.to_be_bytes().to_vec();
    go.extend_from_slice(b"a");
    go.extend_from_slice(&0u16.to_be_bytes());
    b.extend(option(OPT_GO, &go));
    b
}

#[derive(Debug, Clone)]
struct Req {
    kind: u16,
    flags: u16,
    offset: u64,
    len: u32,
}

fn req() -> impl Strategy<Value = Req> {
    (
        prop_oneof![
            Just(CMD_READ),
            Just(CMD_WRITE),
            Just(CMD_FLUSH),
            Just(CMD_TRIM),
            Just(CMD_WRITE_ZEROES),
            0u16..20
        ],
        prop_oneof![Just(0u16), Just(CMD_FLAG_FUA), any::<u16>()],
        prop_oneof![0..EXPORT, EXPORT - 100..EXPORT + 100, any::<u64>()],
        prop_oneof![0u32..5000, 16_000u32..17_000, any::<u32>()],
    )
        .prop_map(|(kind, flags, offset, len)| Req {
            kind,
            flags,
            offset,
            len,
        })
}

/// A session: handshake, requests (writes carry their payload, capped so the
/// stream stays small), disconnect.
fn session(reqs: &[Req]) -> Vec<u8> {
    let mut b = handshake();
    for (i, r) in reqs.iter().enumerate() {
        b.extend(encode_request(&Request {
            magic: REQUEST_MAGIC,
            flags: r.flags,
            kind: r.kind,
            cookie: i as u64,
            offset: r.offset,
            length: r.len,
        }));
        if r.kind == CMD_WRITE {
            b.resize(b.len() + (r.len as usize).min(20_000), 0xee);
        }
    }
    b.extend(encode_request(&Request {
        magic: REQUEST_MAGIC,
        flags: 0,
        kind: CMD_DISC,
        cookie: 0,
        offset: 0,
        length: 0,
    }));
    b
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<usize>().prop_map(Mutation::Truncate),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..40)
        )
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
    ]
}

fn mutate(mut b: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    for m in ms {
        if b.is_empty() {
            break;
        }
        match m {
            Mutation::Flip(i, x) => {
                let n = b.len();
                b[i % n] ^= x;
            }
            Mutation::Truncate(i) => {
                let n = b.len();
                b.truncate(i % n);
            }
            Mutation::Insert(i, v) => {
                let at = i % (b.len() + 1);
                b.splice(at..at, v.iter().copied());
            }
        }
    }
    b
}

fn guards_intact(backing: &MemVolume) -> bool {
    let s = backing.snapshot();
    let ok = |r: std::ops::Range<u64>| r.clone().all(|i| s[i as usize] == (i % 251) as u8);
    ok(0..GUARD) && ok(GUARD + EXPORT..EXPORT + 2 * GUARD)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_bytes_end_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let (backing, server) = setup(false);
        let out = serve(server, bytes);
        // The greeting always goes out first; nothing was written anywhere.
        prop_assert_eq!(&out[..18], &encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES)[..]);
        prop_assert!(guards_intact(&backing));
    }

    #[test]
    fn random_requests_after_a_valid_handshake(tail in proptest::collection::vec(any::<u8>(), 0..600)) {
        let (backing, server) = setup(false);
        let mut input = handshake();
        input.extend(tail);
        serve(server, input);
        prop_assert!(guards_intact(&backing));
    }

    #[test]
    fn mutated_sessions_never_touch_outside_the_export(
        reqs in proptest::collection::vec(req(), 1..12),
        muts in proptest::collection::vec(mutation(), 0..4),
    ) {
        let (backing, server) = setup(false);
        serve(server, mutate(session(&reqs), &muts));
        prop_assert!(guards_intact(&backing));
    }

    #[test]
    fn mutated_sessions_never_change_a_read_only_export(
        reqs in proptest::collection::vec(req(), 1..12),
        muts in proptest::collection::vec(mutation(), 0..4),
    ) {
        let (backing, server) = setup(true);
        let before = backing.snapshot();
        serve(server, mutate(session(&reqs), &muts));
        prop_assert!(backing.snapshot() == before, "a read-only export changed");
    }
}

/// The properties above mean something only if a session does reach the volume.
#[test]
fn an_unmutated_session_writes_inside_the_export() {
    let (backing, server) = setup(false);
    let r = Req {
        kind: CMD_WRITE,
        flags: CMD_FLAG_FUA,
        offset: 100,
        len: 1000,
    };
    let out = serve(server, session(&[r]));
    let s = backing.snapshot();
    let start = (GUARD + 100) as usize;
    assert!(s[start..start + 1000].iter().all(|&b| b == 0xee));
    assert!(guards_intact(&backing));
    // Greeting, two option replies ... then a simple reply with error 0.
    let tail = &out[out.len() - 16..];
    assert_eq!(tail, &simple_reply(0, 0)[..]);
}
