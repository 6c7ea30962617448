//! FUA through an array, directly and over NBD: a FUA write to a RAID 5 is
//! made durable on the members it wrote (their flush is seen by a recording
//! member volume), and on no other; a plain write flushes nothing; a flush
//! reaches every member. Over NBD, raidlab's client sends the FUA flag and the
//! server passes it to the array; NBD_CMD_WRITE_ZEROES becomes the array's
//! write-zeroes (a RAID 5 promises no zeros after a trim, so no hole is
//! punched), whose whole stripes reach the members as member write-zeroes.

use raidlab_core::{Result, Volume};
use raidlab_devices::{Access, MemVolume, Recorded};
use raidlab_layout::{Layout, Level, ParityLayout};
use raidlab_nbd::client::NbdVolume;
use raidlab_nbd::listen::{run, Listener};
use raidlab_nbd::{Export, Limits, Server};
use raidlab_raid::array::Array;
use raidlab_raid::assemble::{CreateSpec, Device, NewMember};
use raidlab_raid::stripe_cache::StripeCacheConfig;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const CHUNK: u64 = 64 << 10;

fn raid5(members: usize) -> (Arc<Array>, Vec<Arc<Recorded>>) {
    raid5_with(members, "resync")
}

/// A RAID 5 keeping `policy` ("resync", "ppl" or "journal": then the last
/// recorded volume is the journal device).
fn raid5_with(members: usize, policy: &str) -> (Arc<Array>, Vec<Arc<Recorded>>) {
    let journal = policy == "journal";
    let recorded: Vec<Arc<Recorded>> = (0..members + usize::from(journal))
        .map(|_| Arc::new(Recorded::new(Arc::new(MemVolume::new(8 << 20)))))
        .collect();
    let vols = recorded
        .iter()
        .map(|r| r.clone() as Arc<dyn Volume>)
        .collect();
    (raid5_over(vols, policy), recorded)
}

/// A new RAID 5 over `vols`, 64 KiB chunks, keeping `policy` (as
/// [`raid5_with`]; with "journal" the last of `vols` is the journal device).
fn raid5_over(mut vols: Vec<Arc<dyn Volume>>, policy: &str) -> Arc<Array> {
    let journal = if policy == "journal" {
        vols.pop()
    } else {
        None
    };
    let new = vols
        .into_iter()
        .enumerate()
        .map(|(i, volume)| NewMember {
            device: Device {
                path: format!("m{i}"),
                volume,
            },
            zeroed: true,
        })
        .collect();
    let spec = CreateSpec {
        level: Level::Raid5,
        layout: Layout::Parity(ParityLayout::LeftSymmetric),
        chunk_bytes: CHUNK,
        spares: 0,
        name: "fua".into(),
        force: false,
        bitmap: false,
        bitmap_chunk: None,
        ppl: policy == "ppl",
    };
    let journal_device = journal.map(|volume| NewMember {
        device: Device {
            path: "journal".into(),
            volume,
        },
        zeroed: true,
    });
    let mut asm = raidlab_raid::assemble::create_with_journal(&spec, new, journal_device).unwrap();
    asm.start_ppl().unwrap();
    asm.start_journal().unwrap();
    asm.mark_dirty().unwrap();
    Arc::new(asm.array().unwrap())
}

/// Serve `array` over a Unix socket while `f` uses a client of it.
fn served(array: &Arc<Array>, f: impl FnOnce(&NbdVolume)) {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let exports = vec![Export {
        name: "md".into(),
        description: "RAID 5".into(),
        volume: array.clone(),
        read_only: false,
        preferred_block: 4096,
        multi_conn: true,
    }];
    let server = Server::new(exports, Limits::default(), Box::new(|_| {}));
    let listener = Listener::Unix(UnixListener::bind(&sock).unwrap());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| run(&server, std::slice::from_ref(&listener), &stop, &|_| {}).unwrap());
        let client =
            NbdVolume::connect(&format!("nbd+unix:///md?socket={}", sock.display())).unwrap();
        f(&client);
        drop(client);
        stop.store(true, Ordering::SeqCst);
    });
}

fn flushes(members: &[Arc<Recorded>]) -> Vec<u64> {
    members.iter().map(|m| m.flushes()).collect()
}

/// The members a write of `[at, at+len)` writes, by the array's own plan.
fn written_by(array: &Array, at: u64, len: u64) -> Vec<usize> {
    let mut roles: Vec<usize> = array
        .plan_write(at, len)
        .unwrap()
        .writes()
        .map(|op| op.member)
        .collect();
    roles.sort_unstable();
    roles.dedup();
    roles
}

/// What each member's flush count grew by while `f` ran.
fn flushed_during(members: &[Arc<Recorded>], f: impl FnOnce()) -> Vec<u64> {
    let before = flushes(members);
    f();
    flushes(members)
        .iter()
        .zip(before)
        .map(|(a, b)| a - b)
        .collect()
}

fn only(roles: &[usize], n: usize) -> Vec<u64> {
    (0..n).map(|r| u64::from(roles.contains(&r))).collect()
}

/// A FUA write, a plain write and a flush through `v` (the array or an NBD
/// client of it), each checked against the members' flushes.
fn check(v: &dyn Volume, array: &Array, members: &[Arc<Recorded>]) {
    let n = members.len();
    let at = 5 * CHUNK + 4096;
    let roles = written_by(array, at, 4096);
    // A 4 KiB write on a RAID 5 writes one data and one parity member.
    assert_eq!(roles.len(), 2, "roles {roles:?}");
    let data = vec![0xa5u8; 4096];
    let plain = flushed_during(members, || v.write_at(&data, at).unwrap());
    assert_eq!(plain, vec![0; n], "a plain write flushed members");
    let fua = flushed_during(members, || v.write_at_fua(&data, at).unwrap());
    assert_eq!(fua, only(&roles, n), "FUA write of roles {roles:?}");
    let mut back = vec![0u8; 4096];
    array.read_at(&mut back, at).unwrap();
    assert_eq!(back, data);
    // Two chunks of one stripe and the next stripe's first: four members.
    let wide = written_by(array, 2 * CHUNK, 4 * CHUNK);
    let big = vec![0x3cu8; 4 * CHUNK as usize];
    let fua = flushed_during(members, || v.write_at_fua(&big, 2 * CHUNK).unwrap());
    assert_eq!(fua, only(&wide, n), "FUA write of roles {wide:?}");
    let all = flushed_during(members, || v.flush().unwrap());
    assert_eq!(all, vec![1; n], "a flush reaches every member");
}

#[test]
fn a_fua_write_flushes_the_members_it_wrote_and_no_other() {
    let (array, members) = raid5(5);
    check(&*array, &array, &members);
}

/// With a partial parity log the log write is flushed by its own plan
/// (before the data), and a FUA write then flushes the members its data
/// plan wrote and no other; with a write journal, the journal's flush makes
/// the write durable and no member is flushed for it.
#[test]
fn a_fua_write_on_a_logged_array_flushes_no_member_it_did_not_write() {
    let at = 5 * CHUNK + 4096;
    let data = vec![0x5au8; 4096];
    let (array, members) = raid5_with(5, "ppl");
    let roles = written_by(&array, at, 4096);
    assert_eq!(roles.len(), 2, "roles {roles:?}");
    let fua = flushed_during(&members, || array.write_at_fua(&data, at).unwrap());
    for (r, n) in fua.iter().enumerate() {
        if roles.contains(&r) {
            assert!(*n >= 1, "PPL: role {r} written but not flushed: {fua:?}");
        } else {
            assert_eq!(*n, 0, "PPL: role {r} not written but flushed: {fua:?}");
        }
    }
    let (array, devices) = raid5_with(5, "journal");
    let fua = flushed_during(&devices, || array.write_at_fua(&data, at).unwrap());
    assert_eq!(&fua[..5], &[0; 5], "journal: members flushed: {fua:?}");
    assert!(fua[5] >= 1, "journal: the journal was not flushed: {fua:?}");
    let mut back = vec![0u8; 4096];
    array.read_at(&mut back, at).unwrap();
    assert_eq!(back, data, "journal: the write reads back");
}

#[test]
fn a_fua_write_held_by_the_stripe_cache_is_written_out_and_flushed() {
    let (array, members) = raid5(4);
    array
        .start_stripe_cache(StripeCacheConfig::default(), raidlab_core::clock::system())
        .unwrap();
    let at = 9 * CHUNK;
    let roles = written_by(&array, at, 4096);
    let data = vec![0x77u8; 4096];
    for m in &members {
        m.take();
    }
    let fua = flushed_during(&members, || array.write_at_fua(&data, at).unwrap());
    assert_eq!(fua, only(&roles, members.len()));
    // The held piece went down before the flush: the data member has it.
    let wrote: Vec<usize> = (0..members.len())
        .filter(|&r| members[r].take().iter().any(|a| a.access == Access::Write))
        .collect();
    assert_eq!(wrote, roles);
}

#[test]
fn fua_over_nbd_reaches_the_arrays_members() {
    let (array, members) = raid5(5);
    served(&array, |client| {
        check(client, &array, &members);
        // Write-zeroes over NBD reads back as zeros.
        client.write_zeroes(3 * CHUNK, 2 * CHUNK).unwrap();
        let mut back = vec![1u8; 2 * CHUNK as usize];
        array.read_at(&mut back, 3 * CHUNK).unwrap();
        assert!(back.iter().all(|&b| b == 0));
    });
}

/// Memory that counts the bytes asked of it as write-zeroes.
#[derive(Debug)]
struct Zeroed {
    mem: MemVolume,
    zeroed: AtomicU64,
}

impl Volume for Zeroed {
    fn name(&self) -> String {
        "zeroed".into()
    }
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.mem.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.mem.write_at(buf, offset)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.zeroed.fetch_add(len, Ordering::SeqCst);
        self.mem.write_zeroes(offset, len)
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

#[test]
fn nbd_write_zeroes_of_whole_stripes_becomes_member_write_zeroes() {
    let members: Vec<Arc<Zeroed>> = (0..4)
        .map(|_| {
            Arc::new(Zeroed {
                mem: MemVolume::new(8 << 20),
                zeroed: AtomicU64::new(0),
            })
        })
        .collect();
    let array = raid5_over(
        members
            .iter()
            .map(|m| m.clone() as Arc<dyn Volume>)
            .collect(),
        "resync",
    );
    let stripe = 3 * CHUNK;
    array.write_at(&vec![0x5a; 4 * stripe as usize], 0).unwrap();
    served(&array, |client| {
        // Two whole stripes, from the second on.
        client.write_zeroes(stripe, 2 * stripe).unwrap();
        client.flush().unwrap();
    });
    let mut back = vec![1u8; 4 * stripe as usize];
    array.read_at(&mut back, 0).unwrap();
    let (s, e) = (stripe as usize, 3 * stripe as usize);
    assert!(back[..s].iter().all(|&b| b == 0x5a));
    assert!(back[s..e].iter().all(|&b| b == 0));
    assert!(back[e..].iter().all(|&b| b == 0x5a));
    // Every member (data and parity) zeroed a chunk of each stripe.
    for m in &members {
        assert_eq!(m.zeroed.load(Ordering::SeqCst), 2 * CHUNK);
    }
}
