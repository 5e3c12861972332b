//! The places of `buddy serve`'s connection cap, and who gives one up when
//! a connection comes and every place is taken: the connection that has
//! waited longest for a request head (a new one that has not sent its head
//! whole, or a kept-alive one between requests), as nginx reuses its idle
//! connections. A connection with a request in flight (its response not yet
//! handed over in full, an event stream open) is never chosen; when every
//! connection has one, the newcomer is refused and `accept.rs` answers 503.
//!
//! Choosing is cheap at any size: the waiting connections are kept in the
//! order they began to wait (a `BTreeMap` keyed by a counter), so an
//! eviction, a request's start and its end are each O(log n) under one lock.
//!
//! Not here: sockets, hyper and timers (`accept.rs`). An evicted
//! connection is told through its [`Place`]; closing it is its task's job.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// Evicted connections whose task has not closed the socket yet, at most:
/// past this the accept loop waits for them, so a flood cannot run the
/// descriptors past the cap by more than this.
pub const CLOSING_AT_ONCE: usize = 64;

pub struct Admission {
    table: Mutex<Table>,
    /// Told whenever a place or a closing slot frees.
    freed: Notify,
}

struct Table {
    cap: usize,
    /// Places taken: admitted connections, neither closed nor evicted.
    held: usize,
    /// Evicted connections not closed yet (their places went to others).
    closing: usize,
    /// Connections waiting for a request head, by when they began: the
    /// first entry is the oldest.
    waiting: BTreeMap<u64, Arc<Shared>>,
    /// The next key of `waiting` (keys start at 1: 0 means "not waiting").
    next: u64,
}

/// One connection's state as the table sees it. The atomics are changed
/// only under the table's lock; they are atomics so the connection's side
/// can share them without a lock of its own.
struct Shared {
    /// Its key in `waiting`, or 0 while a request is in flight.
    key: AtomicU64,
    /// Requests in flight (hyper serves one at a time; counted anyway).
    in_flight: AtomicUsize,
    evicted: AtomicBool,
    evict: Notify,
}

/// What happened to a connection that came.
pub enum Admit {
    In(Place),
    /// Every place is held by a connection with a request in flight.
    Full,
    /// A place could be freed, but [`CLOSING_AT_ONCE`] evicted connections
    /// are still closing: wait for [`Admission::freed`] and try again.
    Later,
}

impl Admission {
    pub fn new(cap: usize) -> Arc<Admission> {
        Arc::new(Admission {
            table: Mutex::new(Table {
                cap: cap.max(1),
                held: 0,
                closing: 0,
                waiting: BTreeMap::new(),
                next: 1,
            }),
            freed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // The table holds no invariant a panic between two statements could
        // break for good; a poisoned lock is used as it is.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives a new connection a place: a free one, else the place of the
    /// connection that has waited longest for a request head (told to close).
    /// The new connection starts out waiting for its head.
    pub fn admit(self: &Arc<Self>) -> Admit {
        let mut t = self.lock();
        if t.held < t.cap {
            t.held += 1;
        } else {
            if t.closing >= CLOSING_AT_ONCE && !t.waiting.is_empty() {
                return Admit::Later;
            }
            let Some((_, victim)) = t.waiting.pop_first() else {
                return Admit::Full;
            };
            victim.key.store(0, Ordering::Relaxed);
            victim.evicted.store(true, Ordering::Relaxed);
            // Its place passes to the newcomer: `held` is unchanged.
            t.closing += 1;
            victim.evict.notify_one();
        }
        let shared = Arc::new(Shared {
            key: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            evicted: AtomicBool::new(false),
            evict: Notify::new(),
        });
        t.wait(&shared);
        Admit::In(Place {
            admission: Arc::clone(self),
            shared,
        })
    }

    /// Resolves after the next time a place or a closing slot frees (from
    /// when it is enabled or first polled).
    pub fn freed(&self) -> tokio::sync::futures::Notified<'_> {
        self.freed.notified()
    }

    /// Resolves once every admitted connection has closed.
    pub async fn drained(&self) {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the check, so a close between the two is seen.
            freed.as_mut().enable();
            {
                let t = self.lock();
                if t.held == 0 && t.closing == 0 {
                    return;
                }
            }
            freed.await;
        }
    }

    #[cfg(test)]
    fn counts(&self) -> (usize, usize, usize) {
        let t = self.lock();
        (t.held, t.closing, t.waiting.len())
    }
}

impl Table {
    /// Puts `c` at the back of the waiting line (it is the newest).
    fn wait(&mut self, c: &Arc<Shared>) {
        let key = self.next;
        self.next += 1;
        c.key.store(key, Ordering::Relaxed);
        self.waiting.insert(key, Arc::clone(c));
    }

    /// Takes `c` out of the waiting line, if it is in it.
    fn unwait(&mut self, c: &Shared) {
        let key = c.key.swap(0, Ordering::Relaxed);
        if key != 0 {
            self.waiting.remove(&key);
        }
    }
}

/// A connection's place, held by its task until the connection closes.
pub struct Place {
    admission: Arc<Admission>,
    shared: Arc<Shared>,
}

impl Place {
    /// Resolves when the place was given to a newer connection: the
    /// connection is to close at once.
    pub async fn evicted(&self) {
        self.shared.evict.notified().await;
    }

    /// What the connection's service needs to mark its requests.
    pub fn requests(&self) -> Requests {
        Requests {
            admission: Arc::clone(&self.admission),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        {
            let mut t = self.admission.lock();
            t.unwait(&self.shared);
            if self.shared.evicted.load(Ordering::Relaxed) {
                t.closing -= 1;
            } else {
                t.held -= 1;
            }
        }
        self.admission.freed.notify_waiters();
    }
}

/// Marks a connection's requests in flight: cheap to clone, one per
/// connection's service.
#[derive(Clone)]
pub struct Requests {
    admission: Arc<Admission>,
    shared: Arc<Shared>,
}

impl Requests {
    /// A request head has been read: the connection is out of the waiting
    /// line until the returned guard (kept with the response's body) drops.
    pub fn start(&self) -> InFlight {
        let mut t = self.admission.lock();
        t.unwait(&self.shared);
        self.shared.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight {
            requests: self.clone(),
        }
    }
}

/// A request in flight; dropped when its response has been handed over in
/// full (or abandoned), which puts the connection back to waiting.
pub struct InFlight {
    requests: Requests,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let Requests { admission, shared } = &self.requests;
        let mut t = admission.lock();
        let left = shared.in_flight.fetch_sub(1, Ordering::Relaxed) - 1;
        if left == 0 && !shared.evicted.load(Ordering::Relaxed) {
            t.wait(shared);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(a: &Arc<Admission>) -> Place {
        match a.admit() {
            Admit::In(p) => p,
            Admit::Full => panic!("refused: full"),
            Admit::Later => panic!("refused: later"),
        }
    }

    fn is_evicted(p: &Place) -> bool {
        p.shared.evicted.load(Ordering::Relaxed)
    }

    #[test]
    fn at_the_cap_the_oldest_waiting_connection_gives_up_its_place() {
        let a = Admission::new(2);
        let first = place(&a);
        let second = place(&a);
        let third = place(&a);
        assert!(is_evicted(&first) && !is_evicted(&second) && !is_evicted(&third));
        assert_eq!(a.counts(), (2, 1, 2));
        drop(first);
        assert_eq!(
            a.counts(),
            (2, 0, 2),
            "the evicted place is not freed twice"
        );
        drop((second, third));
        assert_eq!(a.counts(), (0, 0, 0));
    }

    #[test]
    fn a_connection_with_a_request_in_flight_is_never_evicted() {
        let a = Admission::new(2);
        let busy = place(&a);
        let request = busy.requests().start();
        let idle = place(&a);
        let newcomer = place(&a);
        assert!(is_evicted(&idle) && !is_evicted(&busy));
        drop(idle);
        // Both places in flight: nobody to evict.
        let _second = newcomer.requests().start();
        assert!(matches!(a.admit(), Admit::Full));
        // Its response handed over, the first waits again and can go.
        drop(request);
        let _third = place(&a);
        assert!(is_evicted(&busy) && !is_evicted(&newcomer));
    }

    #[test]
    fn a_kept_alive_connection_waits_again_at_the_back_of_the_line() {
        let a = Admission::new(2);
        let old = place(&a);
        let young = place(&a);
        drop(old.requests().start());
        let _newcomer = place(&a);
        assert!(is_evicted(&young), "the one that waited longest goes");
        assert!(!is_evicted(&old));
    }

    #[test]
    fn when_every_place_is_in_flight_a_newcomer_is_refused_and_a_close_frees_one() {
        let a = Admission::new(1);
        let p = place(&a);
        let r = p.requests().start();
        assert!(matches!(a.admit(), Admit::Full));
        drop(r);
        drop(p);
        assert_eq!(a.counts(), (0, 0, 0));
        let _p = place(&a);
    }

    #[test]
    fn evictions_wait_once_too_many_connections_are_still_closing() {
        let a = Admission::new(1);
        let mut held = vec![place(&a)];
        for _ in 0..CLOSING_AT_ONCE {
            held.push(place(&a));
        }
        assert!(matches!(a.admit(), Admit::Later));
        // The first evicted one closes: room for one more eviction.
        held.remove(0);
        held.push(place(&a));
        assert_eq!(a.counts(), (1, CLOSING_AT_ONCE, 1));
    }

    #[tokio::test]
    async fn drained_resolves_once_the_last_connection_closes() {
        let a = Admission::new(4);
        let p = place(&a);
        let waiter = tokio::spawn({
            let a = Arc::clone(&a);
            async move { a.drained().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(p);
        waiter.await.unwrap();
    }

    #[test]
    fn ten_thousand_waiting_connections_are_evicted_oldest_first() {
        let a = Admission::new(10_000);
        let mut held: std::collections::VecDeque<Place> = (0..10_000).map(|_| place(&a)).collect();
        for _ in 0..10_000 {
            held.push_back(place(&a));
            // The front is the oldest: it was the one evicted, and closes.
            let oldest = held.pop_front().unwrap();
            assert!(is_evicted(&oldest));
        }
        assert!(held.iter().all(|p| !is_evicted(p)));
        assert_eq!(a.counts(), (10_000, 0, 10_000));
    }
}
