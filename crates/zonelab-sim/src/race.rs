//! Waiting for whichever of two events comes first, e.g. a notification or a deadline.
//!
//! Written here rather than taken from `futures` (`select`) because the simulation needs only
//! this one deterministic form: the first future is always polled first, so when both are
//! ready at the same instant the outcome does not depend on anything but program order.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Which of two raced futures finished.
#[derive(Debug, PartialEq, Eq)]
pub enum Raced<A, B> {
    First(A),
    Second(B),
}

/// Future returned by [`race`].
pub struct Race<A, B> {
    first: A,
    second: B,
}

/// Completes with the output of whichever of `first` and `second` completes first (`first` when
/// both are ready at one poll) and drops the other, which cancels it if it cancels on drop
/// (as [`crate::sync::Notified`] does). Pass `&mut fut` to keep a future (a deadline's
/// [`crate::Sim::sleep_until`], say) for a later race.
pub fn race<A, B>(first: A, second: B) -> Race<A, B>
where
    A: Future + Unpin,
    B: Future + Unpin,
{
    Race { first, second }
}

impl<A, B> Future for Race<A, B>
where
    A: Future + Unpin,
    B: Future + Unpin,
{
    type Output = Raced<A::Output, B::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(a) = Pin::new(&mut self.first).poll(cx) {
            return Poll::Ready(Raced::First(a));
        }
        if let Poll::Ready(b) = Pin::new(&mut self.second).poll(cx) {
            return Poll::Ready(Raced::Second(b));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::Notify;
    use crate::{Nanos, Sim};

    /// A notification before the deadline wins at its own time; without one, the deadline
    /// wins; a kept deadline is not restarted by a second race.
    #[test]
    fn race_takes_the_first_event_and_keeps_a_reused_deadline() {
        let sim = Sim::new();
        let notify = Notify::new();
        let (s, n) = (sim.clone(), notify.clone());
        sim.spawn(async move {
            s.sleep(Nanos(300)).await;
            n.notify_all();
        });
        let s = sim.clone();
        let out = sim
            .block_on(async move {
                let mut deadline = s.sleep_until(Nanos(1000));
                let first = race(notify.notified(), &mut deadline).await;
                let at_first = s.now();
                let second = race(notify.notified(), &mut deadline).await;
                (first, at_first, second, s.now(), notify.waiters())
            })
            .unwrap();
        assert_eq!(out.0, Raced::First(()));
        assert_eq!(out.1, Nanos(300));
        assert_eq!(out.2, Raced::Second(()));
        assert_eq!(out.3, Nanos(1000));
        assert_eq!(out.4, 0, "the losing notified() left the queue");
    }
}
