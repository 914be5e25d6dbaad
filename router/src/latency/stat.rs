//! One measured figure: an exponentially weighted moving average for the
//! trend, and a sliding window for quantiles (p50, p90).

use std::collections::VecDeque;

/// Samples the quantiles are taken over.
const WINDOW: usize = 128;
/// Weight of each new sample in the average.
const ALPHA: f64 = 0.2;

#[derive(Debug, Clone)]
pub struct Stat {
    ewma: f64,
    window: VecDeque<f64>,
    /// The window's samples in order, kept as samples come and go (a
    /// quantile is then a lookup, asked on every routing decision); each
    /// as its [`order_key`], so the binary searches compare integers.
    sorted: Vec<i64>,
}

/// `value`'s place in `f64::total_cmp`'s order, as an integer that compares
/// the same way (the standard library's own mapping, a few instructions).
/// Comparing floats by `total_cmp` in the window's binary searches made
/// `observe` cost 939 instructions a request (three figures), 702 with
/// the keys.
fn order_key(value: f64) -> i64 {
    flip(value.to_bits() as i64)
}

/// The sample an [`order_key`] stands for.
fn from_order_key(key: i64) -> f64 {
    f64::from_bits(flip(key) as u64)
}

/// Flips every bit but the sign where the sign is set, so that floats'
/// bits, as integers, order as `total_cmp` orders the floats; its own
/// inverse.
fn flip(bits: i64) -> i64 {
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

impl Stat {
    /// Starts from a prior (a config hint or a probe result), which counts
    /// as one sample until real ones arrive.
    pub fn new(prior: f64) -> Self {
        Stat {
            ewma: prior,
            window: VecDeque::from([prior]),
            sorted: vec![order_key(prior)],
        }
    }

    pub fn observe(&mut self, value: f64) {
        if !value.is_finite() {
            return;
        }
        self.ewma = ALPHA * value + (1.0 - ALPHA) * self.ewma;
        let key = order_key(value);
        let place = |sorted: &[i64], x: i64| sorted.partition_point(|v| *v < x);
        if self.window.len() == WINDOW
            && let Some(oldest) = self.window.pop_front()
        {
            // The new sample takes the oldest one's place, shifting only the
            // samples between the two (a remove then an insert shifts up to
            // the whole window twice).
            let from = place(&self.sorted, order_key(oldest));
            let to = place(&self.sorted, key);
            if to > from {
                self.sorted.copy_within(from + 1..to, from);
                self.sorted[to - 1] = key;
            } else {
                self.sorted.copy_within(to..from, to + 1);
                self.sorted[to] = key;
            }
        } else {
            let to = place(&self.sorted, key);
            self.sorted.insert(to, key);
        }
        self.window.push_back(value);
    }

    pub fn mean(&self) -> f64 {
        self.ewma
    }

    /// The q-quantile (0..=1) of the recent window.
    pub fn quantile(&self, q: f64) -> f64 {
        let last = self.sorted.len().saturating_sub(1);
        let index = ((last as f64) * q.clamp(0.0, 1.0)).round() as usize;
        self.sorted
            .get(index)
            .map_or(self.ewma, |key| from_order_key(*key))
    }

    pub fn samples(&self) -> usize {
        self.window.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window's samples, in the order kept.
    fn samples(stat: &Stat) -> Vec<f64> {
        stat.sorted.iter().map(|k| from_order_key(*k)).collect()
    }

    /// Keys order samples as `total_cmp` does, and give them back whole.
    #[test]
    fn keys_order_samples_as_total_cmp_does() {
        let values = [
            -f64::MAX,
            -1e9,
            -1.5,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            1e-300,
            0.5,
            1.0,
            7.25,
            1e9,
            f64::MAX,
        ];
        for a in values {
            assert_eq!(from_order_key(order_key(a)).to_bits(), a.to_bits());
            for b in values {
                assert_eq!(order_key(a).cmp(&order_key(b)), a.total_cmp(&b), "{a} {b}");
            }
        }
    }

    #[test]
    fn follows_new_samples() {
        let mut stat = Stat::new(100.0);
        for _ in 0..50 {
            stat.observe(10.0);
        }
        assert!((stat.mean() - 10.0).abs() < 0.1);
        assert_eq!(stat.quantile(0.5), 10.0);
        for v in 1..=10 {
            stat.observe(f64::from(v) * 100.0);
        }
        assert!(stat.quantile(0.99) >= 900.0);
        assert_eq!(stat.quantile(0.0), 10.0);
    }

    #[test]
    fn the_window_slides_and_stays_sorted() {
        let mut stat = Stat::new(0.0);
        // Shuffled values 1..=300: the window keeps the last 128 observed.
        let values: Vec<f64> = (1..=300).map(|i| f64::from((i * 7919) % 300 + 1)).collect();
        for v in &values {
            stat.observe(*v);
        }
        let mut last: Vec<f64> = values[values.len() - WINDOW..].to_vec();
        last.sort_by(f64::total_cmp);
        assert_eq!(samples(&stat), last);
        assert_eq!(stat.quantile(0.0), last[0]);
        assert_eq!(stat.quantile(1.0), last[WINDOW - 1]);
    }

    #[test]
    fn repeated_values_come_and_go_in_order() {
        let mut stat = Stat::new(5.0);
        let values: Vec<f64> = (1..=1000).map(|i| f64::from((i * 37) % 11)).collect();
        for (n, v) in values.iter().enumerate() {
            stat.observe(*v);
            let mut expected: Vec<f64> = std::iter::once(5.0)
                .chain(values[..=n].iter().copied())
                .collect();
            expected.drain(..expected.len().saturating_sub(WINDOW));
            expected.sort_by(f64::total_cmp);
            assert_eq!(samples(&stat), expected, "after {} samples", n + 1);
        }
    }
}
