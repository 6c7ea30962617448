//! Requests as tasks: a closure run on a stack of its own (a coroutine) that
//! *suspends* where a thread would block, and a runner that resumes it when
//! what it waits for has happened. This is how one engine runs under two
//! clocks: on real threads nothing here is ever entered and every wait blocks
//! as before; under the simulator each request of the real engine is a task,
//! its member I/O, stripe-lock waits and sleeps suspend it, and the simulator
//! resumes it in virtual time.
//!
//! Decides only how a waiting task gives control back and how a waiter is
//! told to look again ([`wake`]); *what* is waited for is its caller's. It
//! must never block a thread itself, and the engine's code must never tell
//! whether it runs in a task except through [`suspend`] (false outside one).
//!
//! The engine's locks that are held across member I/O are [`Mutex`]es: a task
//! that finds one held suspends until it is let go, where a thread would wait
//! in the kernel (two tasks on one thread waiting in the kernel for each other
//! would never wake).

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell};
use std::sync::{PoisonError, TryLockError};
use std::thread::ThreadId;
use std::time::Duration;

/// What a suspended task waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Until [`wake`] is called with this key (a lock let go): the task then
    /// looks again, and may suspend again.
    Key(usize),
    /// Until the runner's clock reaches this time.
    Until(Duration),
    /// Until the runner says: something the runner itself was asked for (a
    /// member operation it issued), numbered by it.
    Runner(u64),
}

thread_local! {
    /// The yielder of the task running on this thread; null outside a task.
    static CURRENT: Cell<*const Yielder<(), Wait>> = const { Cell::new(std::ptr::null()) };
    /// Keys woken since the runner last looked.
    static WOKEN: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// Runners driving tasks on this thread right now ([`Runner::enter`]):
    /// only then is a wake worth keeping.
    static RUNNERS: Cell<usize> = const { Cell::new(0) };
}

/// Whether this code runs inside a task.
pub fn in_task() -> bool {
    CURRENT.with(|c| !c.get().is_null())
}

/// Give control back to the task's runner until `why` has happened. Returns
/// false at once, doing nothing, outside a task: the caller then waits as a
/// thread does.
pub fn suspend(why: Wait) -> bool {
    let y = CURRENT.with(Cell::get);
    if y.is_null() {
        return false;
    }
    // SAFETY: CURRENT is non-null only while this thread runs inside the
    // coroutine whose yielder it points at. It is set when that coroutine's
    // body starts and again just below, when the body goes on after a
    // suspension, and `Task::resume` clears it (through a guard, so also when
    // the body panics) as soon as the coroutine gives control back. The
    // yielder is the coroutine's own and outlives its body. The safe
    // reference: the same code run as plain threads, where this is never
    // reached (tests `a_task_waits_for_a_lock_a_task_holds` and
    // `outside_a_task_the_lock_is_a_mutex`).
    let yielder = unsafe { &*y };
    yielder.suspend(why);
    CURRENT.with(|c| c.set(y));
    true
}

/// Tell tasks waiting for `key` to look again. Outside a runner's drive
/// (plain threads) it does nothing: their waits are the kernel's.
pub fn wake(key: usize) {
    if RUNNERS.with(Cell::get) > 0 {
        WOKEN.with(|w| w.borrow_mut().push(key));
    }
}

/// A runner driving tasks on this thread, for as long as it is held: wakes
/// are kept for it ([`Runner::woken`]).
#[derive(Debug)]
pub struct Runner(());

impl Runner {
    pub fn enter() -> Runner {
        RUNNERS.with(|r| r.set(r.get() + 1));
        Runner(())
    }

    /// Keys woken since the last call, in the order they were, appended to
    /// `out`.
    pub fn woken(&self, out: &mut Vec<usize>) {
        WOKEN.with(|w| out.append(&mut w.borrow_mut()));
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        RUNNERS.with(|r| r.set(r.get() - 1));
        if RUNNERS.with(Cell::get) == 0 {
            WOKEN.with(|w| w.borrow_mut().clear());
        }
    }
}

/// Where a task is after a resume.
#[derive(Debug)]
pub enum Step<R> {
    Waits(Wait),
    Done(R),
}

/// Stacks of finished tasks, for the next ones: a stack is a mapping, and
/// one per request would cost two system calls a request.
#[derive(Default)]
pub struct Stacks(Vec<DefaultStack>);

impl std::fmt::Debug for Stacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stacks({} kept)", self.0.len())
    }
}

/// Bytes of a task's stack. Mapped, not committed: only the pages a request
/// touches cost memory. The engine's deepest path (a degraded write through
/// the stripe cache, a log and failure handling) with an unoptimised build
/// needs well under this.
const STACK_BYTES: usize = 1 << 20;

impl Stacks {
    fn take(&mut self) -> std::io::Result<DefaultStack> {
        match self.0.pop() {
            Some(s) => Ok(s),
            None => DefaultStack::new(STACK_BYTES),
        }
    }
}

/// One task: a closure on its own stack.
pub struct Task<R> {
    co: Option<Coroutine<(), Wait, R, DefaultStack>>,
    /// The thread it runs on: a task never moves between threads while it is
    /// suspended (see the `Send` below).
    thread: ThreadId,
}

impl<R> std::fmt::Debug for Task<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("done", &self.co.as_ref().map_or(true, |c| c.done()))
            .finish()
    }
}

/// Clears [`CURRENT`] when a resume returns, or unwinds.
struct Left;

impl Drop for Left {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(std::ptr::null()));
    }
}

impl<R: 'static> Task<R> {
    /// A task that will run `f` from its first [`Task::resume`].
    pub fn new(stacks: &mut Stacks, f: impl FnOnce() -> R + 'static) -> std::io::Result<Task<R>> {
        let stack = stacks.take()?;
        let co = Coroutine::with_stack(stack, move |y: &Yielder<(), Wait>, ()| {
            CURRENT.with(|c| c.set(y as *const _));
            f()
        });
        Ok(Task {
            co: Some(co),
            thread: std::thread::current().id(),
        })
    }

    /// Run the task until it suspends or returns. A panic inside it comes out
    /// here, as from a call.
    pub fn resume(&mut self) -> Step<R> {
        assert_eq!(
            self.thread,
            std::thread::current().id(),
            "internal: a task resumed on another thread than its own"
        );
        let co = self.co.as_mut().expect("internal: a finished task resumed");
        let _left = Left;
        match co.resume(()) {
            CoroutineResult::Yield(w) => Step::Waits(w),
            CoroutineResult::Return(r) => Step::Done(r),
        }
    }

    /// Give a finished task's stack back for the next.
    pub fn finish(mut self, stacks: &mut Stacks) {
        if let Some(co) = self.co.take() {
            if co.done() {
                stacks.0.push(co.into_stack());
            } else {
                self.co = Some(co);
            }
        }
    }
}

impl<R> Drop for Task<R> {
    fn drop(&mut self) {
        // A task dropped while suspended is unwound (its guards let go) on
        // its own thread; elsewhere it is leaked, which is safe, rather than
        // run its destructors on a thread it never ran on.
        if let Some(co) = self.co.take() {
            if !co.done() && self.thread != std::thread::current().id() {
                std::mem::forget(co);
            }
        }
    }
}

// SAFETY: a coroutine is not `Send` because what its stack holds may be tied
// to its thread (a lock's guard, a thread-local's borrow). A `Task` is only
// ever resumed on the thread that made it (asserted in `resume`) and, if
// suspended, only unwound there (`Drop` leaks it elsewhere), so nothing on its
// stack is touched from another thread; moving the handle moves a pointer.
// The safe reference: the engine on plain threads, where no task exists.
unsafe impl<R: Send> Send for Task<R> {}

/// A mutual-exclusion lock for what the engine holds across member I/O: as
/// `std::sync::Mutex` on threads; in a task, finding it held suspends the
/// task until it is let go. Poisoning is ignored, as the engine's locks do:
/// what they guard stays consistent at every panic point.
#[derive(Debug, Default)]
pub struct Mutex<T> {
    inner: std::sync::Mutex<T>,
}

/// Held [`Mutex`]; let go on drop.
#[derive(Debug)]
pub struct MutexGuard<'a, T> {
    inner: Option<std::sync::MutexGuard<'a, T>>,
    key: usize,
}

impl<T> Mutex<T> {
    pub const fn new(t: T) -> Self {
        Mutex {
            inner: std::sync::Mutex::new(t),
        }
    }

    fn key(&self) -> usize {
        self as *const Self as usize
    }

    fn guard<'a>(&'a self, g: std::sync::MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        MutexGuard {
            inner: Some(g),
            key: self.key(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, T> {
        loop {
            match self.inner.try_lock() {
                Ok(g) => return self.guard(g),
                Err(TryLockError::Poisoned(p)) => return self.guard(p.into_inner()),
                Err(TryLockError::WouldBlock) => {
                    if !suspend(Wait::Key(self.key())) {
                        let g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
                        return self.guard(g);
                    }
                }
            }
        }
    }

    /// The value, the lock no longer needed.
    pub fn into_inner(self) -> T {
        self.inner
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The lock if nobody holds it.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.inner.try_lock() {
            Ok(g) => Some(self.guard(g)),
            Err(TryLockError::Poisoned(p)) => Some(self.guard(p.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.inner.take();
        wake(self.key);
    }
}

impl<T> std::ops::Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.inner.as_ref().expect("held until dropped")
    }
}

impl<T> std::ops::DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.inner.as_mut().expect("held until dropped")
    }
}

/// A reader-writer lock for what the engine holds across member I/O, as
/// [`Mutex`] is for exclusive ones: as `std::sync::RwLock` on threads; in a
/// task, finding it held the other way suspends the task until a holder
/// lets go. Poisoning is ignored, as [`Mutex`]'s.
#[derive(Debug, Default)]
pub struct RwLock<T> {
    inner: std::sync::RwLock<T>,
}

/// [`RwLock`] held shared; let go on drop.
#[derive(Debug)]
pub struct RwLockReadGuard<'a, T> {
    inner: Option<std::sync::RwLockReadGuard<'a, T>>,
    key: usize,
}

/// [`RwLock`] held alone; let go on drop.
#[derive(Debug)]
pub struct RwLockWriteGuard<'a, T> {
    inner: Option<std::sync::RwLockWriteGuard<'a, T>>,
    key: usize,
}

impl<T> RwLock<T> {
    pub const fn new(t: T) -> Self {
        RwLock {
            inner: std::sync::RwLock::new(t),
        }
    }

    fn key(&self) -> usize {
        self as *const Self as usize
    }

    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        let key = self.key();
        let g = loop {
            match self.inner.try_read() {
                Ok(g) => break g,
                Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    if !suspend(Wait::Key(key)) {
                        break self.inner.read().unwrap_or_else(PoisonError::into_inner);
                    }
                }
            }
        };
        RwLockReadGuard {
            inner: Some(g),
            key,
        }
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        let key = self.key();
        let g = loop {
            match self.inner.try_write() {
                Ok(g) => break g,
                Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    if !suspend(Wait::Key(key)) {
                        break self.inner.write().unwrap_or_else(PoisonError::into_inner);
                    }
                }
            }
        };
        RwLockWriteGuard {
            inner: Some(g),
            key,
        }
    }
}

impl<T> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.inner.take();
        wake(self.key);
    }
}

impl<T> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.inner.take();
        wake(self.key);
    }
}

impl<T> std::ops::Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.inner.as_ref().expect("held until dropped")
    }
}

impl<T> std::ops::Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.inner.as_ref().expect("held until dropped")
    }
}

impl<T> std::ops::DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.inner.as_mut().expect("held until dropped")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::sync::Arc;

    /// Resume every task in turn until all are done, waking key waiters when
    /// their key is let go: a runner in miniature.
    fn run_all(tasks: Vec<Task<()>>) -> Vec<Wait> {
        let runner = Runner::enter();
        let mut stacks = Stacks::default();
        let mut seen = Vec::new();
        let mut live: Vec<Option<Task<()>>> = tasks.into_iter().map(Some).collect();
        let mut woken = Vec::new();
        while live.iter().any(Option::is_some) {
            for slot in live.iter_mut() {
                let Some(t) = slot.as_mut() else { continue };
                match t.resume() {
                    Step::Waits(w) => seen.push(w),
                    Step::Done(()) => slot.take().expect("present").finish(&mut stacks),
                }
            }
            runner.woken(&mut woken);
        }
        seen
    }

    #[test]
    fn a_task_waits_for_a_lock_a_task_holds() {
        let m = Arc::new(Mutex::new(Vec::new()));
        let order = Rc::new(RefCell::new(Vec::new()));
        let mut stacks = Stacks::default();
        let (m1, o1) = (m.clone(), order.clone());
        let a = Task::new(&mut stacks, move || {
            let mut g = m1.lock();
            g.push(1);
            // Holding the lock across a wait, as a write holds a log's.
            assert!(suspend(Wait::Runner(7)));
            g.push(2);
            o1.borrow_mut().push("a");
        })
        .unwrap();
        let (m2, o2) = (m.clone(), order.clone());
        let b = Task::new(&mut stacks, move || {
            m2.lock().push(3);
            o2.borrow_mut().push("b");
        })
        .unwrap();
        let seen = run_all(vec![a, b]);
        assert_eq!(*m.lock(), vec![1, 2, 3]);
        assert_eq!(*order.borrow(), vec!["a", "b"]);
        assert_eq!(seen[0], Wait::Runner(7));
        assert!(seen.contains(&Wait::Key(Arc::as_ptr(&m) as usize)));
        assert!(!in_task());
    }

    #[test]
    fn outside_a_task_the_lock_is_a_mutex() {
        assert!(!suspend(Wait::Runner(1)));
        let m = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 4000);
        assert!(m.try_lock().is_some());
    }

    #[test]
    fn a_panic_in_a_task_comes_out_of_resume_and_leaves_no_task_current() {
        let mut stacks = Stacks::default();
        let mut t = Task::new(&mut stacks, || -> () { panic!("planted") }).unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.resume()));
        assert!(r.is_err());
        assert!(!in_task());
    }

    /// A task that wants a reader-writer lock alone while another task holds
    /// it shared across a wait suspends rather than block the thread (which
    /// would never wake), and goes on once the reader lets go; readers share.
    #[test]
    fn a_task_waits_for_a_shared_lock_a_task_holds() {
        let l = Arc::new(RwLock::new(Vec::new()));
        let mut stacks = Stacks::default();
        let l1 = l.clone();
        let reader = Task::new(&mut stacks, move || {
            let g = l1.read();
            assert!(suspend(Wait::Runner(1)));
            assert!(g.is_empty());
        })
        .unwrap();
        let l2 = l.clone();
        let other_reader = Task::new(&mut stacks, move || {
            // Shared with the first reader, which holds it across its wait.
            let g = l2.read();
            assert!(g.is_empty());
        })
        .unwrap();
        let l3 = l.clone();
        let writer = Task::new(&mut stacks, move || l3.write().push(1)).unwrap();
        let seen = run_all(vec![reader, other_reader, writer]);
        assert_eq!(*l.read(), vec![1]);
        let key = Arc::as_ptr(&l) as usize;
        assert_eq!(seen.iter().filter(|w| **w == Wait::Key(key)).count(), 1);
        assert!(!in_task());
    }

    #[test]
    fn outside_a_task_the_rwlock_is_a_rwlock() {
        let l = Arc::new(RwLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        *l.write() += 1;
                        let _ = *l.read();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*l.read(), 4000);
    }
}
