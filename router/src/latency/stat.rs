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
    /// quantile is then a lookup, asked on every routing decision).
    sorted: Vec<f64>,
}

impl Stat {
    /// Starts from a prior (a config hint or a probe result), which counts
    /// as one sample until real ones arrive.
    pub fn new(prior: f64) -> Self {
        Stat {
            ewma: prior,
            window: VecDeque::from([prior]),
            sorted: vec![prior],
        }
    }

    pub fn observe(&mut self, value: f64) {
        if !value.is_finite() {
            return;
        }
        self.ewma = ALPHA * value + (1.0 - ALPHA) * self.ewma;
        let place = |sorted: &[f64], x: f64| sorted.partition_point(|v| v.total_cmp(&x).is_lt());
        if self.window.len() == WINDOW
            && let Some(oldest) = self.window.pop_front()
        {
            // The new sample takes the oldest one's place, shifting only the
            // samples between the two (a remove then an insert shifts up to
            // the whole window twice).
            let from = place(&self.sorted, oldest);
            let to = place(&self.sorted, value);
            if to > from {
                self.sorted.copy_within(from + 1..to, from);
                self.sorted[to - 1] = value;
            } else {
                self.sorted.copy_within(to..from, to + 1);
                self.sorted[to] = value;
            }
        } else {
            let to = place(&self.sorted, value);
            self.sorted.insert(to, value);
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
        self.sorted.get(index).copied().unwrap_or(self.ewma)
    }

    pub fn samples(&self) -> usize {
        self.window.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(stat.sorted, last);
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
            assert_eq!(stat.sorted, expected, "after {} samples", n + 1);
        }
    }
}
