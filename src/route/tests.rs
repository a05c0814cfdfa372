//! Unit tests of the router, the frame rules, the route frame and the communication contract.

use super::*;
use crate::roster::Tier;
use crate::roster::{AgentSpec, Roster};

fn lane(name: &str, kws: &[&str]) -> AgentSpec {
    AgentSpec {
        name: name.into(),
        category: "engineering".into(),
        domain: String::new(),
        keywords: kws.iter().map(|s| s.to_string()).collect(),
        model_tier: Tier::Capable,
        executor: "cli".into(),
        max_turns: 10,
    }
}

fn route(text: &str, agents: &[AgentSpec]) -> RouteDecision {
    Router::default().route(text, agents)
}

fn scores(d: &RouteDecision) -> Vec<(&str, f64)> {
    d.candidates
        .iter()
        .map(|c| (c.agent.as_str(), c.score))
        .collect()
}

#[test]
fn tokenizer_rules() {
    let t = |s: &str| tokenize(s).into_iter().collect::<Vec<_>>();
    assert_eq!(t("café au lait"), ["au", "caf", "lait"]);
    assert_eq!(t("api_server"), ["api", "server"]);
    assert_eq!(t("ci-cd"), ["cd", "ci"]);
    assert_eq!(t("BUILD the Server"), ["build", "server", "the"]);
    assert_eq!(t("x2 x2 x2"), ["x2"]);
    assert_eq!(t("日本語 naïve"), ["na", "ve"]);
    assert!(t("!!! ... ???").is_empty());
    // The Kelvin sign lowercases to an ASCII k; a dotted capital I to i + combining dot.
    assert_eq!(t("\u{212A}ernel"), ["kernel"]);
    assert_eq!(t("\u{130}ndex"), ["i", "ndex"]);
}

#[test]
fn score_is_hits_over_keywords_with_repeats() {
    let lanes = [lane("a", &["x", "x", "y", "z"]), lane("b", &["q"])];
    let d = route("x x x", &lanes);
    // A keyword listed twice counts twice; a word repeated in the request counts once.
    assert_eq!(scores(&d), [("a", 0.5), ("b", 0.0)]);
    assert_eq!(d.decided.as_deref(), Some("a"));
    assert_eq!(d.rule, RouteRule::Confident);
    assert_eq!(d.confidence, 0.5);
}

#[test]
fn keywords_are_lowercased_before_matching() {
    let lanes = [lane("a", &["API"]), lane("b", &["q", "r"])];
    let d = route("the api", &lanes);
    assert_eq!(d.decided.as_deref(), Some("a"));
    assert_eq!(d.confidence, 1.0);
}

#[test]
fn snake_case_and_unicode_requests() {
    let lanes = [
        lane("net", &["api", "server", "endpoint"]),
        lane("ui", &["css", "caf"]),
    ];
    let d = route("api_server — endpoint", &lanes);
    assert_eq!(d.decided.as_deref(), Some("net"));
    assert_eq!(d.confidence, 1.0);
    // "café" yields the token "caf", which the second lane lists.
    let d = route("café ☕ css", &lanes);
    assert_eq!(d.decided.as_deref(), Some("ui"));
}

#[test]
fn ties_break_by_name_not_roster_order() {
    let a = [lane("zeta", &["x"]), lane("alpha", &["x"])];
    let b = [lane("alpha", &["x"]), lane("zeta", &["x"])];
    for lanes in [&a[..], &b[..]] {
        let d = route("x", lanes);
        assert_eq!(scores(&d), [("alpha", 1.0), ("zeta", 1.0)]);
        assert!(d.needs_escalation);
        assert_eq!(d.confidence, 0.0);
    }
}

fn numbered(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}{i}")).collect()
}

fn lane_n(name: &str, prefix: &str, n: usize) -> AgentSpec {
    let kws = numbered(prefix, n);
    lane(name, &kws.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn escalation_margin_uses_double_arithmetic() {
    // 0.5 - 0.35 is 0.15000000000000002 in doubles: at least the margin, so it decides.
    let lanes = [lane_n("a", "a", 2), lane_n("b", "b", 20)];
    let text = format!("a1 {}", numbered("b", 7).join(" "));
    let d = route(&text, &lanes);
    assert_eq!(scores(&d), [("a", 0.5), ("b", 0.35)]);
    assert_eq!(d.rule, RouteRule::Confident);
    assert_eq!(d.decided.as_deref(), Some("a"));
    // 0.6 - 0.45 is 0.14999999999999997: short of the margin. Both lanes have 9 hits, so
    // neither hit rule applies and the route escalates with the margin as confidence.
    let lanes = [lane_n("a", "a", 15), lane_n("b", "b", 20)];
    let text = format!(
        "{} {}",
        numbered("a", 9).join(" "),
        numbered("b", 9).join(" ")
    );
    let d = route(&text, &lanes);
    assert_eq!(scores(&d), [("a", 0.6), ("b", 0.45)]);
    assert!(d.needs_escalation);
    assert_eq!(d.decided, None);
    assert_eq!(d.confidence, 0.14999999999999997);
    // Just below the threshold with a wide lead: 2 of 5 against nothing escalates.
    let lanes = [lane_n("a", "a", 5), lane_n("b", "b", 3)];
    let d = route("a1 a2", &lanes);
    assert!(d.needs_escalation);
    assert_eq!(d.confidence, 0.4);
}

#[test]
fn threshold_is_inclusive() {
    let lanes = [
        lane("a", &["x", "y"]),
        lane("b", &["z", "w", "v", "u", "t", "s", "r"]),
    ];
    let d = route("x z", &lanes);
    // 0.5 vs 1/7: decides at exactly the threshold.
    assert_eq!(d.decided.as_deref(), Some("a"));
    assert_eq!(d.confidence, 0.5);
}

#[test]
fn raw_hit_leader_wins_with_a_low_score() {
    let many: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let many_refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let lanes = [
        lane("big", &many_refs),
        lane("small", &["k0", "s1"]), // shares k0 with big
        lane("other", &["o1", "o2", "o3"]),
    ];
    let d = route("k0 k1 k2 k3", &lanes);
    // small scores 0.5 against big's 0.2: the normalised rule decides first.
    assert_eq!(d.decided.as_deref(), Some("small"));
    assert_eq!(d.rule, RouteRule::Confident);
    let d = route("k1 k2 k3 o1", &lanes);
    // "other" scores 1/3 (below the threshold) and "big" 3/20, but "big" has 3 raw hits
    // against 1.
    assert_eq!(d.rule, RouteRule::HitLeader);
    assert_eq!(d.decided.as_deref(), Some("big"));
    assert_eq!(d.confidence, 0.5); // max(0.15, 0.5)
    assert_eq!(
        scores(&d),
        [("big", 0.15), ("other", 1.0 / 3.0), ("small", 0.0)],
        "the leader goes first, the rest stay by score then name"
    );
}

#[test]
fn raw_hit_leader_needs_a_two_hit_lead() {
    let many: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let m: Vec<&str> = many.iter().map(String::as_str).collect();
    let lanes = [
        lane("big", &m),
        lane(
            "mid",
            &["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10"],
        ),
    ];
    // 3 hits vs 2 hits: lead of 1 → no rule 2; top score is mid (0.2 vs 0.15), its hits 2
    // < 3 → no rule 3 → escalate.
    let d = route("k1 k2 k3 m1 m2", &lanes);
    assert!(d.needs_escalation);
    assert_eq!(d.confidence, 0.2 - 0.15);
    // 4 vs 2 → rule 2.
    let d = route("k1 k2 k3 k4 m1 m2", &lanes);
    assert_eq!(d.rule, RouteRule::HitLeader);
    assert_eq!(d.decided.as_deref(), Some("big"));
}

#[test]
fn top_score_hit_floor_applies_when_raw_hits_tie() {
    // Two lanes tie on 3 raw hits (so rule 2 fails), but the best-scoring lane has 3 hits
    // and the second-best by score has 1 hit: rule 3 decides.
    let lanes = [
        lane("aa", &["a1", "a2", "a3", "a4", "a5", "a6"]), // 3/6 = 0.5
        lane(
            "bb",
            &["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10"],
        ), // 3/10
        lane("cc", &["c1", "c2"]),                         // 1/2 = 0.5
    ];
    let d = route("a1 a2 a3 b1 b2 b3 c1", &lanes);
    // sorted: aa 0.5, cc 0.5, bb 0.3 → rule 1 fails (margin 0).
    assert_eq!(scores(&d), [("aa", 0.5), ("cc", 0.5), ("bb", 0.3)]);
    assert_eq!(d.rule, RouteRule::TopScoreHits);
    assert_eq!(d.decided.as_deref(), Some("aa"));
    assert_eq!(d.confidence, 0.5);
}

#[test]
fn empty_roster_and_empty_request_escalate() {
    let d = route("anything", &[]);
    assert!(d.candidates.is_empty());
    assert!(d.needs_escalation);
    assert_eq!(d.confidence, 0.0);
    let d = route("", &[lane("a", &["x"])]);
    assert!(d.needs_escalation);
    assert_eq!(d.confidence, 0.0);
}

#[test]
fn request_checks() {
    assert_eq!(check_request(""), Err(RequestError::Empty));
    assert_eq!(check_request(" \t\n"), Err(RequestError::Empty));
    assert_eq!(check_request("!!! ... ???"), Err(RequestError::NoWords));
    assert_eq!(check_request("— … ☕"), Err(RequestError::NoWords));
    assert_eq!(check_request("日本語"), Ok(()));
    assert_eq!(check_request("fix it"), Ok(()));
}

fn roster(lanes: Vec<AgentSpec>) -> Roster {
    Roster::new(lanes).unwrap()
}

#[test]
fn frame_rules_in_order_and_agent_membership() {
    let r = roster(vec![
        lane("backend", &["api", "server"]),
        lane("ci-cd", &["deploy"]),
        lane("zzz", &["qqq"]),
    ]);
    // "model" belongs to rule 1, which is tried first, even though "api" is rule 6's.
    let (_, f) = route_request("model api", &r);
    assert_eq!(f.domain, "model-foundry");
    assert_eq!(f.signals, ["model"]);
    // ci-cd decided with no frame words: rule 3 by membership, empty signals.
    let (d, f) = route_request("deploy", &r);
    assert_eq!(d.decided.as_deref(), Some("ci-cd"));
    assert_eq!(f.domain, "validation");
    assert!(f.signals.is_empty());
    assert_eq!(f.model_tier.as_deref(), Some("capable"));
    assert_eq!(f.executor.as_deref(), Some("cli"));
    // Nothing matches → the general fallback, no runtime fields when escalated.
    let (d, f) = route_request("hello there", &r);
    assert!(d.needs_escalation);
    assert_eq!(f.domain, "general");
    assert_eq!(f.agent, None);
    assert_eq!(f.model_tier, None);
    assert_eq!(f.proof_lane, None);
    assert_eq!(f.delivery_profile, DeliveryProfile::Operator);
    // Signals are sorted and deduplicated.
    let (_, f) = route_request("Tests, REVIEW and tests", &r);
    assert_eq!(f.domain, "validation");
    assert_eq!(f.signals, ["review", "tests"]);
}

#[test]
fn escalated_route_gets_no_agent_even_with_a_leader() {
    let r = roster(vec![lane("backend", &["api", "x", "y", "z", "w"])]);
    let (d, f) = route_request("api", &r);
    assert!(d.needs_escalation);
    assert_eq!(f.agent, None);
    assert_eq!(f.domain, "implementation");
}

#[test]
fn contract_labels_and_text() {
    let c = build_communication_contract("", "", "", " Engineer ", None, None, "hc").unwrap();
    assert_eq!(c.domain, "general");
    assert_eq!(c.intent, "coordinate");
    assert_eq!(c.posture, "operator");
    assert_eq!(c.profile, DeliveryProfile::Engineer);
    assert_eq!(
        c.structure,
        ["change", "interface", "verification", "risk", "next step"]
    );
    assert_eq!(c.avoid, AVOID);
    assert_eq!(
        c.required_moves,
        ["name the owner", "state the next coordinated action"]
    );
    let text = c.prompt_text();
    assert_eq!(text.lines().count(), 9);
    assert!(text.starts_with("Communication contract:\nPosture: operator / engineer\n"));
    assert!(text.ends_with("\nRoute contract: hc"));
    assert!(build_communication_contract("d", "i", "p", "poet", None, None, "").is_err());
    // Unknown posture keeps its label but takes the operator's moves.
    let c = build_communication_contract("d", "i", "wizard", "operator", None, None, "").unwrap();
    assert_eq!(c.posture, "wizard");
    assert_eq!(c.lead, Posture::Operator.lead());
}

#[test]
fn payload_key_order() {
    let r = roster(vec![lane("backend", &["api"])]);
    let (d, f) = route_request("api", &r);
    let v = d.to_value(&f);
    let Value::Object(top) = &v else { panic!() };
    let keys: Vec<&str> = top.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "decided",
            "confidence",
            "needs_escalation",
            "candidates",
            "frame"
        ]
    );
    let Some(Value::Object(frame)) = v.get("frame") else {
        panic!()
    };
    let keys: Vec<&str> = frame.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "schema",
            "agent",
            "domain",
            "intent",
            "posture",
            "delivery_profile",
            "model_tier",
            "executor",
            "proof_lane",
            "domain_lane",
            "human_contract",
            "communication_contract",
            "signals"
        ]
    );
}

struct Fixed(&'static str);
impl Classifier for Fixed {
    type Error = std::convert::Infallible;

    fn classify(
        &self,
        _: &str,
        _: &Roster,
        _: &RouteDecision,
    ) -> Result<Classification, Self::Error> {
        Ok(Classification {
            agent: self.0.into(),
            confidence: 0.7,
            reason: "because".into(),
        })
    }
}

#[test]
fn classifier_settles_escalated_routes_only() {
    let r = roster(vec![lane("a", &["x"]), lane("b", &["x"])]);
    let (d, _) = route_request("x", &r);
    assert!(d.needs_escalation);
    let c = Fixed("b").classify("x", &r, &d).unwrap();
    let s = d.settle(&c, &r).unwrap();
    assert_eq!(s.decided.as_deref(), Some("b"));
    assert_eq!(s.rule, RouteRule::Classified);
    assert!(!s.needs_escalation);
    let f = derive_route_frame("x", &s, &r);
    assert_eq!(f.agent.as_deref(), Some("b"));
    assert!(matches!(
        d.settle(&Fixed("nope").classify("x", &r, &d).unwrap(), &r),
        Err(SettleError::UnknownAgent(_))
    ));
    assert!(matches!(
        s.settle(&c, &r),
        Err(SettleError::AlreadyDecided(_))
    ));
    let p = c.payload("x");
    assert_eq!(p.get("agent").and_then(Value::as_str), Some("b"));
}

#[test]
fn default_roster_routes_typical_requests() {
    let r = Roster::default_roster();
    let decide = |t: &str| route_request(t, &r).0.decided;
    assert_eq!(
        decide("add a REST api endpoint to the server").as_deref(),
        Some("backend")
    );
    assert_eq!(
        decide("fix the flaky integration tests and coverage").as_deref(),
        Some("tests")
    );
    assert_eq!(
        decide("write a sql migration for the schema").as_deref(),
        Some("database")
    );
    assert_eq!(
        decide("update the readme and docs guide").as_deref(),
        Some("docs")
    );
    assert_eq!(
        decide("bump the version, tag and publish the release").as_deref(),
        Some("release")
    );
    assert_eq!(
        decide("rebase the branch and resolve the merge conflict").as_deref(),
        Some("git")
    );
    assert_eq!(decide("hello there"), None);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn lanes_strategy() -> impl Strategy<Value = Vec<AgentSpec>> {
        proptest::collection::btree_map(
            "[a-e]{1,3}",
            proptest::collection::vec("[a-h]{1,2}", 1..6),
            0..7,
        )
        .prop_map(|m| {
            m.into_iter()
                .map(|(name, kws)| {
                    let refs: Vec<&str> = kws.iter().map(String::as_str).collect();
                    lane(&name, &refs)
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn roster_order_never_matters(
            lanes in lanes_strategy(),
            words in proptest::collection::vec("[a-h]{1,2}", 0..8),
            seed in any::<u64>(),
        ) {
            let text = words.join(" ");
            let d1 = Router::default().route(&text, &lanes);
            let mut shuffled = lanes.clone();
            // Deterministic permutation from the seed.
            let n = shuffled.len();
            let mut s = seed;
            for i in (1..n).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                shuffled.swap(i, (s >> 33) as usize % (i + 1));
            }
            let d2 = Router::default().route(&text, &shuffled);
            prop_assert_eq!(d1, d2);
        }

        #[test]
        fn decisions_are_consistent(
            lanes in lanes_strategy(),
            words in proptest::collection::vec("[a-h]{1,2}", 0..8),
        ) {
            let d = Router::default().route(&words.join(" "), &lanes);
            prop_assert_eq!(d.candidates.len(), lanes.len());
            prop_assert_eq!(d.decided.is_none(), d.needs_escalation);
            if let Some(a) = &d.decided {
                prop_assert_eq!(&d.candidates[0].agent, a);
                prop_assert!(d.confidence >= 0.5);
            } else {
                prop_assert!(d.confidence >= 0.0);
            }
        }

        #[test]
        fn any_text_routes_without_panic(text in any::<String>()) {
            let r = Roster::default_roster();
            let (d, f) = route_request(&text, &r);
            let _ = d.to_value(&f).canonical();
        }
    }
}

// ---- the routing ladder of a one-task run ----

/// Two lanes the keyword router cannot separate on `x`, and one it decides on `y z w`.
fn ladder_roster() -> Roster {
    roster(vec![
        lane("a", &["x"]),
        lane("b", &["x"]),
        lane("c", &["y", "z", "w"]),
    ])
}

#[test]
fn the_ladder_asks_the_classifier_only_when_the_router_cannot_decide() {
    let r = ladder_roster();
    let (decided, _) = route_request("y z w", &r);
    assert_eq!(first_rung(&decided), Rung::Decided("c".into()));
    let (tie, _) = route_request("x", &r);
    assert_eq!(first_rung(&tie), Rung::Classify);
    let (nothing, _) = route_request("hello there", &r);
    assert_eq!(first_rung(&nothing), Rung::Classify);
    // Forum's own vector: "ship a login API" escalates on the default roster.
    let (login, _) = route_request("ship a login API", &Roster::default_roster());
    assert_eq!(first_rung(&login), Rung::Classify);
}

#[test]
fn a_valid_answer_gives_forums_four_fields_exactly() {
    let r = ladder_roster();
    let text =
        "Sure:\n```json\n{\"agent\": \"b\", \"confidence\": 0.75, \"reason\": \"b owns x\"}\n```";
    let answer = read_answer(text, &r);
    assert_eq!(
        answer,
        Ok(Classification {
            agent: "b".into(),
            confidence: 0.75,
            reason: "b owns x".into(),
        })
    );
    assert_eq!(
        classification_payload("do x", &answer, text).to_serde(),
        serde_json::json!({"task": "do x", "agent": "b", "confidence": 0.75, "reason": "b owns x"})
    );
    // What Forum reads as defaults: no confidence is 0.0, no reason is empty; numeric text
    // is a number.
    assert_eq!(
        read_answer(r#"{"agent": "a"}"#, &r),
        Ok(Classification {
            agent: "a".into(),
            confidence: 0.0,
            reason: String::new(),
        })
    );
    assert_eq!(
        read_answer(r#"{"agent": "a", "confidence": "0.5", "reason": 3}"#, &r),
        Ok(Classification {
            agent: "a".into(),
            confidence: 0.5,
            reason: "3".into(),
        })
    );
}

#[test]
fn an_answer_naming_no_lane_is_never_mapped_to_a_near_one() {
    let r = ladder_roster();
    let unplaced = |t: &str| read_answer(t, &r).unwrap_err();
    assert_eq!(
        unplaced(r#"{"agent": "B", "confidence": 0.9}"#),
        Unplaced::UnknownAgent("B".into())
    );
    assert_eq!(
        unplaced(r#"{"agent": " b", "confidence": 0.9}"#),
        Unplaced::UnknownAgent(" b".into())
    );
    assert_eq!(
        unplaced(r#"{"agent": "none of them"}"#),
        Unplaced::UnknownAgent("none of them".into())
    );
    assert_eq!(unplaced(r#"{"lane": "a"}"#), Unplaced::NoAgent);
    assert_eq!(unplaced(r#"{"agent": null}"#), Unplaced::NoAgent);
    assert_eq!(unplaced(r#"{"agent": ["a"]}"#), Unplaced::NoAgent);
    assert_eq!(
        unplaced(r#"{"agent": "a", "confidence": 1.5}"#),
        Unplaced::BadConfidence("1.5".into())
    );
    assert_eq!(
        unplaced(r#"{"agent": "a", "confidence": "high"}"#),
        Unplaced::BadConfidence("\"high\"".into())
    );
    // Malformed: no object, broken JSON.
    assert_eq!(unplaced("I would pick a."), Unplaced::NoObject);
    assert!(matches!(unplaced("{agent: a}"), Unplaced::NotJson(_)));
    // Witnessed as no lane, with what came back.
    let text = r#"{"agent": "B", "confidence": 0.9, "reason": "close enough"}"#;
    assert_eq!(
        classification_payload("do x", &read_answer(text, &r), text).to_serde(),
        serde_json::json!({
            "task": "do x",
            "agent": null,
            "confidence": 0.0,
            "reason": "no lane was chosen: the answer names \"B\", which is not a lane of the roster",
            "answer": text
        })
    );
    // What is kept of a long answer is bounded.
    let long = "z".repeat(MAX_KEPT_ANSWER + 50);
    let kept = unplaced_payload("t", "why", &long).to_serde();
    assert_eq!(kept["answer"].as_str().unwrap().len(), MAX_KEPT_ANSWER);
}

#[test]
fn the_classifier_is_asked_for_one_roster_lane_by_its_exact_name() {
    let r = ladder_roster();
    let p = classifier_prompt("do x", &r);
    assert!(p.starts_with(CLASSIFIER_OPENING), "{p}");
    assert!(p.contains("- a\n- b\n- c\n"), "{p}");
    assert!(p.ends_with("Task: do x"), "{p}");
    let s = classifier_schema(&r);
    assert_eq!(
        s["properties"]["agent"]["enum"],
        serde_json::json!(["a", "b", "c"])
    );
    assert_eq!(
        s["required"],
        serde_json::json!(["agent", "confidence", "reason"])
    );
    // The route body is Forum's four keys.
    let (d, f) = route_request("x", &r);
    let body = route_payload("x", &d, &f).to_serde();
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["confidence", "decided", "frame", "task"]);
    assert_eq!(body["decided"], serde_json::Value::Null);
}
