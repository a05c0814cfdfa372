//! The compiler: a plan's typed edges, and its Kahn layering into waves (forum-spec §8.3).

use std::collections::{BTreeSet, HashMap};

use super::{CompiledPlan, Edge, Plan, PlanError};

impl Plan {
    /// Typed edges: for each task in plan order, for each dependency in listed order
    /// (duplicates kept).
    pub fn edges(&self) -> Vec<Edge> {
        self.tasks
            .iter()
            .flat_map(|t| {
                t.depends_on.iter().map(|d| Edge {
                    from: d.clone(),
                    to: t.id.clone(),
                    kind: t.edge_type(d),
                })
            })
            .collect()
    }

    /// Ids used by more than one task, sorted.
    pub(crate) fn duplicate_ids(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        let mut dups = BTreeSet::new();
        for t in &self.tasks {
            if !seen.insert(t.id.as_str()) {
                dups.insert(t.id.clone());
            }
        }
        dups.into_iter().collect()
    }

    /// Forum's Kahn layering (`Plan.schedule`, forum-spec §8.3), exactly: unknown
    /// dependencies are reported first (the first task in plan order that has any), then
    /// cycles. A repeated id keeps its first position and takes the later task's
    /// dependencies, as Forum does.
    pub fn schedule(&self) -> Result<Vec<Vec<String>>, PlanError> {
        // remaining: id → deps, first-insertion order, later duplicates overwrite.
        let mut order: Vec<&str> = Vec::new();
        let mut deps: HashMap<&str, BTreeSet<&str>> = HashMap::new();
        for t in &self.tasks {
            let set: BTreeSet<&str> = t.depends_on.iter().map(String::as_str).collect();
            if deps.insert(t.id.as_str(), set).is_none() {
                order.push(t.id.as_str());
            }
        }
        for id in &order {
            let unknown: Vec<String> = deps[id]
                .iter()
                .filter(|d| !deps.contains_key(*d))
                .map(|d| d.to_string())
                .collect();
            if !unknown.is_empty() {
                return Err(PlanError::UnknownDeps {
                    task: id.to_string(),
                    unknown,
                });
            }
        }
        let mut pending: HashMap<&str, usize> = HashMap::new();
        let mut dependents: HashMap<&str, Vec<&str>> = HashMap::new();
        for id in &order {
            pending.insert(id, deps[id].len());
            for d in &deps[id] {
                dependents.entry(d).or_default().push(id);
            }
        }
        let mut ready: Vec<&str> = order
            .iter()
            .copied()
            .filter(|id| pending[id] == 0)
            .collect();
        let mut waves = Vec::new();
        let mut scheduled = 0;
        while scheduled < order.len() {
            if ready.is_empty() {
                let mut left: Vec<String> = pending
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(id, _)| id.to_string())
                    .collect();
                left.sort();
                return Err(PlanError::Cycle(left));
            }
            ready.sort_unstable();
            let mut next = Vec::new();
            for id in &ready {
                for dep in dependents.get(id).map(Vec::as_slice).unwrap_or_default() {
                    let n = pending.get_mut(dep).expect("dependent is a task");
                    *n -= 1;
                    if *n == 0 {
                        next.push(*dep);
                    }
                }
            }
            scheduled += ready.len();
            waves.push(ready.iter().map(|s| s.to_string()).collect());
            ready = next;
        }
        Ok(waves)
    }

    /// Strict compilation: duplicate ids are refused up front, then [`Plan::schedule`] runs
    /// (unknown dependencies, then cycles).
    pub fn compile(&self) -> Result<CompiledPlan, PlanError> {
        let dups = self.duplicate_ids();
        if !dups.is_empty() {
            return Err(PlanError::DuplicateIds(dups));
        }
        let waves = self.schedule()?;
        Ok(CompiledPlan {
            tasks: self.tasks.clone(),
            waves,
            edges: self.edges(),
        })
    }
}
