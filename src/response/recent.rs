//! The last few things of one kind made on a thread, kept to be used again.

/// At most `N` items, the oldest replaced first.
pub(super) struct Recent<T, const N: usize> {
    items: [Option<T>; N],
    /// The place the next item takes.
    next: usize,
}

impl<T, const N: usize> Recent<T, N> {
    pub(super) const fn new() -> Self {
        Recent {
            items: [const { None }; N],
            next: 0,
        }
    }

    /// The first kept item that `wanted` accepts.
    pub(super) fn find_mut(&mut self, mut wanted: impl FnMut(&T) -> bool) -> Option<&mut T> {
        self.items.iter_mut().flatten().find(|item| wanted(item))
    }

    /// Keeps `item` in place of the oldest one when all places are taken.
    pub(super) fn push(&mut self, item: T) {
        self.items[self.next] = Some(item);
        self.next = (self.next + 1) % N;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_item_makes_room_for_a_new_one() {
        let mut recent: Recent<u32, 3> = Recent::new();
        assert_eq!(recent.find_mut(|_| true), None);
        for item in 1..=4 {
            recent.push(item);
        }
        assert_eq!(recent.find_mut(|&item| item == 1), None, "replaced");
        for kept in 2..=4 {
            assert_eq!(recent.find_mut(|&item| item == kept).copied(), Some(kept));
        }
        *recent.find_mut(|&item| item == 3).expect("kept") = 30;
        assert_eq!(recent.find_mut(|&item| item == 30).copied(), Some(30));
        recent.push(5);
        assert_eq!(
            recent.find_mut(|&item| item == 2),
            None,
            "the oldest left next"
        );
        assert_eq!(recent.find_mut(|&item| item == 30).copied(), Some(30));
    }
}
