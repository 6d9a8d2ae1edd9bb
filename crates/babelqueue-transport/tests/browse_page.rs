//! `Browser::browse_page`'s provided default: `browse` up to the page's end, the first
//! `offset` dropped.

use async_trait::async_trait;
use babelqueue_transport::{Browser, TransportError};

/// A queue of five bodies that only knows `browse`.
struct Five;

#[async_trait]
impl Browser for Five {
    async fn browse(&self, _queue: &str, max: usize) -> Result<Vec<Vec<u8>>, TransportError> {
        let all: Vec<Vec<u8>> = (1..=5u8).map(|n| vec![n]).collect();
        let n = if max == 0 {
            all.len()
        } else {
            max.min(all.len())
        };
        Ok(all[..n].to_vec())
    }
}

#[tokio::test]
async fn the_default_page_reads_to_its_end_and_drops_the_offset() {
    let rows: [(usize, usize, &[u8]); 6] = [
        (0, 2, &[1, 2]),
        (1, 2, &[2, 3]),
        (3, 0, &[4, 5]),
        (4, 9, &[5]),
        (5, 1, &[]),
        (9, 0, &[]),
    ];
    for (offset, max, expected) in rows {
        let page: Vec<u8> = Five
            .browse_page("q", offset, max)
            .await
            .unwrap()
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(page, expected, "offset {offset} max {max}");
    }
}
