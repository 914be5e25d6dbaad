use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn shape(prompt: u32, cached: u32, output: u32) -> Shape {
    Shape {
        prompt_tokens: prompt,
        cached_tokens: cached,
        output_tokens: output,
        class: PromptClass::Prose,
    }
}

fn observation(prompt: u32, ttft_ms: u64, output: u32, total_ms: u64) -> Observation {
    Observation {
        prompt_tokens: prompt,
        output_tokens: output,
        ttft: Some(ms(ttft_ms)),
        total: ms(total_ms),
        concurrent: 1,
        ..Observation::default()
    }
}

fn predict(model: &BackendLatency, prompt: u32, cached: u32, output: u32) -> Prediction {
    model.predict(&shape(prompt, cached, output), Instant::now(), 0)
}

#[test]
fn a_first_token_that_waited_behind_others_teaches_the_concurrency() {
    let mut model = BackendLatency::new(LatencyHints::default());
    for _ in 0..5 {
        model.observe(&observation(20, 50, 101, 50 + 1000));
    }
    // Told nothing of its concurrency, the model trusts what it saw run
    // at once (one at a time) and one more.
    assert_eq!(model.slots(), 2);
    // A second request beside the first: its first token came after the
    // first's second of decoding.
    let waited = Observation {
        predicted_ttft_ms: Some(50.0),
        concurrent: 2,
        ..observation(20, 1050, 101, 2050)
    };
    let overhead = model.base_ttft_ms.mean();
    model.first_token(&waited);
    model.observe(&waited);
    assert_eq!((model.slots(), model.learned_concurrency()), (1, Some(1)));
    // The overhead did not learn the wait.
    assert_eq!(model.base_ttft_ms.mean(), overhead);
    // With one running, the next is predicted to wait for it.
    let running = model.started(&shape(20, 0, 100), 0);
    model.running(running, Instant::now());
    assert!(predict(&model, 20, 0, 100).queue_ms > 500.0);
    // Two at once without waiting, three times: the limit rises again.
    for seen in 1..=3 {
        model.first_token(&Observation {
            concurrent: 2,
            ..observation(20, 50, 101, 1050)
        });
        assert_eq!(model.slots(), if seen < 3 { 1 } else { 2 });
    }
}

/// Two requests get their slots one after the other and the backend serves
/// the second first: the first, which started alone, waited behind the
/// second all the same, and teaches the concurrency.
#[test]
fn the_request_that_started_first_and_was_served_second_teaches_it_too() {
    let mut model = BackendLatency::new(LatencyHints::default());
    for _ in 0..5 {
        model.observe(&observation(20, 50, 101, 50 + 1000));
    }
    let now = Instant::now();
    let first = model.started(&shape(20, 0, 100), 0);
    model.running(first, now);
    let second = model.started(&shape(20, 0, 100), 0);
    model.running(second, now);
    // The second's first token came at once, beside the first.
    model.first_token(&Observation {
        concurrent: 2,
        work: Some(second),
        ..observation(20, 50, 101, 1050)
    });
    assert_eq!(model.learned_concurrency(), None);
    model.finished(second);
    // The first's came after the second's whole answer; when it got its
    // slot it was alone.
    model.first_token(&Observation {
        concurrent: 1,
        work: Some(first),
        ..observation(20, 1050, 101, 2050)
    });
    assert_eq!((model.slots(), model.learned_concurrency()), (1, Some(1)));
    // Told once: a later first token of the same request is not judged again.
    assert_eq!(model.queue.first_token(first), None);
    model.finished(first);
    // A first token that came at once proves only the requests running
    // when it started: one that got its slot after it, and may be waiting
    // behind it, does not raise the learned figure, however often.
    for _ in 0..3 {
        let alone = model.started(&shape(20, 0, 100), 0);
        model.running(alone, now);
        let after = model.started(&shape(20, 0, 100), 0);
        model.running(after, now);
        model.first_token(&Observation {
            concurrent: 1,
            work: Some(alone),
            ..observation(20, 50, 101, 1050)
        });
        model.finished(alone);
        model.finished(after);
    }
    assert_eq!((model.slots(), model.learned_concurrency()), (1, Some(1)));
}

#[test]
fn learns_overhead_prefill_and_decode() {
    let mut model = BackendLatency::new(LatencyHints::default());
    for _ in 0..40 {
        // 50 ms overhead; 2000 tokens/s prefill; 100 tokens/s decode.
        model.observe(&observation(20, 60, 101, 60 + 1000));
        model.observe(&observation(1000, 550, 11, 550 + 100));
    }
    let short = predict(&model, 20, 0, 100);
    let long = predict(&model, 1000, 0, 100);
    assert!((short.ttft_p50_ms - 60.0).abs() < 15.0, "{short:?}");
    assert!((long.ttft_p50_ms - 550.0).abs() < 60.0, "{long:?}");
    assert!((short.tokens_per_s - 100.0).abs() < 10.0, "{short:?}");
    // Cached tokens skip prefill.
    assert!(predict(&model, 1000, 960, 100).ttft_p50_ms < long.ttft_p50_ms / 3.0);
}

#[test]
fn a_backend_that_slows_down_is_noticed() {
    let mut model = BackendLatency::new(LatencyHints {
        base_ttft: ms(50),
        ..LatencyHints::default()
    });
    let before = predict(&model, 10, 0, 10).ttft_p90_ms;
    for _ in 0..20 {
        model.observe(&observation(10, 2000, 10, 2100));
    }
    assert!(predict(&model, 10, 0, 10).ttft_p90_ms > before * 10.0);
}

#[test]
fn the_work_ahead_is_waited_for_until_it_is_done() {
    let mut model = BackendLatency::new(LatencyHints {
        concurrency: 1,
        base_ttft: ms(100),
        decode_tokens_per_s: 50.0,
        ..LatencyHints::default()
    });
    let idle = predict(&model, 10, 0, 10);
    assert_eq!(idle.queue_ms, 0.0);
    // One request running (100 output tokens: about 2.1 s of service),
    // one waiting behind it.
    let now = Instant::now();
    let first = model.started(&shape(10, 0, 100), 0);
    model.running(first, now);
    let second = model.started(&shape(10, 0, 100), 0);
    let busy = model.predict(&shape(10, 0, 10), now, 0);
    assert!(busy.queue_ms > 4000.0 && busy.queue_ms < 4500.0, "{busy:?}");
    assert!((busy.ttft_p50_ms - idle.ttft_p50_ms - busy.queue_ms).abs() < 1e-6);
    // As the running one proceeds, the wait shrinks; when both are
    // done, there is none.
    let later = model.predict(&shape(10, 0, 10), now + ms(1000), 0);
    assert!(later.queue_ms < busy.queue_ms - 900.0, "{later:?}");
    model.finished(first);
    model.finished(second);
    assert_eq!(predict(&model, 10, 0, 10).queue_ms, 0.0);
}

#[test]
fn rates_are_the_ones_measured_under_the_load_a_request_will_meet() {
    let mut model = BackendLatency::new(LatencyHints {
        concurrency: 4,
        concurrency_known: true,
        decode_tokens_per_s: 100.0,
        ..LatencyHints::default()
    });
    // Alone it decodes at 100 tokens/s; beside three others, at 40.
    for _ in 0..40 {
        model.observe(&observation(10, 50, 101, 50 + 1000));
        model.observe(&Observation {
            concurrent: 4,
            ..observation(10, 50, 41, 50 + 1000)
        });
    }
    assert!((predict(&model, 10, 0, 10).tokens_per_s - 100.0).abs() < 10.0);
    let now = Instant::now();
    for _ in 0..3 {
        let id = model.started(&shape(10, 0, 10), 0);
        model.running(id, now);
    }
    let shared = model.predict(&shape(10, 0, 10), now, 0);
    assert!((shared.tokens_per_s - 40.0).abs() < 5.0, "{shared:?}");
    assert_eq!(shared.queue_ms, 0.0, "a slot is free");
}

#[test]
fn predictions_are_corrected_by_how_they_turned_out() {
    let mut model = BackendLatency::new(LatencyHints {
        base_ttft: ms(100),
        ..LatencyHints::default()
    });
    // The backend answers in 100 ms, but every call waited (somewhere
    // the model does not see) until twice, and one in five four times,
    // what was predicted of it.
    for i in 0..40 {
        let predicted = predict(&model, 10, 0, 10).ttft_p50_ms;
        let factor = if i % 5 == 0 { 4.0 } else { 2.0 };
        model.observe(&Observation {
            predicted_ttft_ms: Some(predicted),
            waited: ms((predicted * factor - 100.0).max(0.0) as u64),
            ..observation(10, 100, 10, 200)
        });
    }
    let corrected = predict(&model, 10, 0, 10);
    assert!(
        (corrected.ttft_p50_ms / 100.0 - 2.0).abs() < 0.3,
        "{corrected:?}"
    );
    assert!(
        (corrected.ttft_p90_ms / 100.0 - 4.0).abs() < 0.5,
        "{corrected:?}"
    );
}

#[test]
fn the_engines_own_queue_is_waited_for() {
    let mut model = BackendLatency::new(LatencyHints {
        concurrency: 1,
        ..LatencyHints::default()
    });
    let now = Instant::now();
    model.set_engine_load(
        EngineLoad {
            running: 1,
            waiting: 3,
        },
        now,
        ms(2000),
    );
    assert!(model.predict(&shape(10, 0, 10), now, 0).queue_ms > 1000.0);
}
