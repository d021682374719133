//! One cache line of a sketch: its cells, the window they count, and a lock.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Cells per line: 64 bytes less the word that holds the window and the lock.
pub(super) const CELLS: usize = 14;

/// The lock bit of the window word.
const LOCKED: u64 = 1 << 63;

/// A cache line of counting cells. For a fixed window all 14 count the window; for a sliding
/// window counter the first 7 count the current window and the last 7 the one before.
#[repr(C, align(64))]
#[derive(Default)]
pub(super) struct Line {
    /// The window the cells count, and the lock bit.
    window: AtomicU64,
    cells: [AtomicU32; CELLS],
}

/// A line, locked: its cells read and written as plain numbers; unlocked when dropped.
pub(super) struct Locked<'a> {
    line: &'a Line,
    pub(super) window: u64,
    pub(super) cells: [u32; CELLS],
}

impl Line {
    /// Locks the line: a spin, as it is held for a few loads and stores, that yields the
    /// thread now and then.
    pub(super) fn lock(&self) -> Locked<'_> {
        let mut spins = 0u32;
        let window = loop {
            let word = self.window.load(Ordering::Relaxed);
            if word & LOCKED == 0
                && self
                    .window
                    .compare_exchange_weak(
                        word,
                        word | LOCKED,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
            {
                break word;
            }
            // A holder preempted mid-request: give it the core rather than spin on.
            spins += 1;
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                spin_loop();
            }
        };
        Locked {
            line: self,
            window,
            cells: std::array::from_fn(|i| self.cells[i].load(Ordering::Relaxed)),
        }
    }
}

impl Locked<'_> {
    /// Writes the cells back (the window is written when the lock is dropped).
    pub(super) fn write(&mut self) {
        for (cell, &value) in self.line.cells.iter().zip(&self.cells) {
            cell.store(value, Ordering::Relaxed);
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.line
            .window
            .store(self.window & !LOCKED, Ordering::Release);
    }
}
