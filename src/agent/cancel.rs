//! Cooperative cancellation: a `watch` channel whose value turns true once. The
//! loop races every wait against `cancelled()` instead of polling a flag.

use tokio::sync::watch;

#[derive(Clone, Debug)]
pub struct Cancel {
    rx: watch::Receiver<bool>,
}

/// The side that cancels.
#[derive(Debug)]
pub struct CancelHandle {
    tx: watch::Sender<bool>,
}

impl Cancel {
    pub fn new() -> (CancelHandle, Cancel) {
        let (tx, rx) = watch::channel(false);
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
        *self.rx.borrow()
    }

    /// Completes when cancellation is requested; never, if the handle is dropped
    /// without cancelling.
    pub async fn cancelled(&mut self) {
        loop {
            if *self.rx.borrow_and_update() {
                return;
            }
            if self.rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

impl CancelHandle {
    pub fn cancel(&self) {
        let _ = self.tx.send(true);
    }
}
