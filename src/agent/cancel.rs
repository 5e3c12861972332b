//! Cooperative cancellation: a `watch` channel whose value turns cancelled
//! once, or gets a deadline (`Op::SetTimeout`). The loop races every wait
//! against `stopped()` instead of polling a flag.

use tokio::sync::watch;
use tokio::time::Instant;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Signal {
    cancelled: bool,
    /// The run stops here unless cancelled first.
    deadline: Option<Instant>,
}

/// Why `stopped` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    Cancelled,
    /// The deadline set with `CancelHandle::stop_at` passed.
    Deadline,
}

#[derive(Clone, Debug)]
pub struct Cancel {
    rx: watch::Receiver<Signal>,
}

/// The side that cancels.
#[derive(Debug)]
pub struct CancelHandle {
    tx: watch::Sender<Signal>,
}

impl Cancel {
    pub fn new() -> (CancelHandle, Cancel) {
        let (tx, rx) = watch::channel(Signal::default());
        (CancelHandle { tx }, Cancel { rx })
    }

    /// A token that is never cancelled.
    pub fn never() -> Cancel {
        let (handle, cancel) = Cancel::new();
        // Keep the sender alive forever without leaking a task: leak the handle.
        std::mem::forget(handle);
        cancel
    }

    pub fn is_cancelled(&self) -> bool {
        self.rx.borrow().cancelled
    }

    /// Completes when cancellation is requested or the deadline set for it
    /// passes; never, if the handle is dropped without either.
    pub async fn stopped(&mut self) -> Why {
        loop {
            let now = *self.rx.borrow_and_update();
            if now.cancelled {
                return Why::Cancelled;
            }
            let deadline = async {
                match now.deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(deadline);
            tokio::select! {
                changed = self.rx.changed() => {
                    if changed.is_err() {
                        // No more changes: only the deadline can still come.
                        deadline.await;
                        return Why::Deadline;
                    }
                }
                () = &mut deadline => return Why::Deadline,
            }
        }
    }
}

impl CancelHandle {
    pub fn cancel(&self) {
        self.tx.send_modify(|s| s.cancelled = true);
    }

    /// Stops the run at `deadline` (replacing one set before).
    pub fn stop_at(&self, deadline: Instant) {
        self.tx.send_modify(|s| s.deadline = Some(deadline));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_deadline_set_while_waiting_stops_the_wait_when_it_passes() {
        let (handle, mut cancel) = Cancel::new();
        let start = Instant::now();
        let waiting = tokio::spawn(async move { cancel.stopped().await });
        tokio::task::yield_now().await;
        handle.stop_at(start + Duration::from_secs(5));
        handle.stop_at(start + Duration::from_secs(2));
        assert_eq!(waiting.await.unwrap(), Why::Deadline);
        assert_eq!(Instant::now() - start, Duration::from_secs(2));
        let (handle, mut cancel) = Cancel::new();
        handle.stop_at(Instant::now() + Duration::from_secs(60));
        handle.cancel();
        assert_eq!(cancel.stopped().await, Why::Cancelled);
    }
}
