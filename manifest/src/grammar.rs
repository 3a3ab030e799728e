//! The grammar of durable calls as replay sees it.
//!
//! A turn saves one entry per durable call ([`Saved`]): its key, its kind and, for a signal
//! wait, the signal's name. On a retry or a wake-up the turn replays from the top, and the call
//! at each position must match the entry saved there. A turn in flight (asleep, waiting for a
//! signal, retrying a failed step) has saved a prefix of one path through its version's
//! grammar; new code can take it over when the new grammar [`accepts`] that prefix.
//!
//! [`prefixes`] lists the prefixes a turn of a grammar can be in flight with, and
//! [`first_difference`] explains how two grammars' shapes differ.
//!
//! ```
//! use turnwise_manifest::grammar::{accepts, Acceptance, Saved};
//! use turnwise_manifest::{Call, CallKind, Node};
//!
//! let grammar = Node::Seq(vec![
//!     Node::Call(Call::new(CallKind::Step, "charge", "src/order.rs:12")),
//!     Node::Loop(Box::new(Node::Call(Call::new(CallKind::Step, "item-*", "src/order.rs:14")))),
//!     Node::Call(Call::new(CallKind::Sleep, "cool-off", "src/order.rs:16")),
//! ]);
//! let saved = [
//!     Saved::new(CallKind::Step, "charge"),
//!     Saved::new(CallKind::Step, "item-1"),
//!     Saved::new(CallKind::Step, "item-2"),
//! ];
//! assert_eq!(accepts(&grammar, &saved), Acceptance::Accepted);
//! let Acceptance::Rejected(divergence) = accepts(&grammar, &[Saved::new(CallKind::Sleep, "nap")])
//! else {
//!     unreachable!()
//! };
//! assert_eq!(divergence.matched, 0);
//! assert_eq!(divergence.expected[0].key, "charge");
//! ```

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::{Call, CallKind, Node, Patch, PATCH_MARKER_PREFIX, WILDCARD};

/// A saved entry as replay compares it: no payloads.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Saved {
    /// The key. An entry enumerated from a grammar ([`prefixes`]) keeps a loop's key pattern.
    pub key: String,
    /// What was saved.
    pub kind: CallKind,
    /// The awaited signal's name, for signal waits, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}

impl Saved {
    /// An entry of `kind` with `key`, no signal name.
    pub fn new(kind: CallKind, key: impl Into<String>) -> Self {
        Saved {
            key: key.into(),
            kind,
            signal: None,
        }
    }

    /// With the awaited signal's name.
    #[must_use]
    pub fn signal(mut self, name: impl Into<String>) -> Self {
        self.signal = Some(name.into());
        self
    }

    /// The entry `call` saves (its key pattern kept as a pattern).
    pub fn of_call(call: &Call) -> Self {
        Saved {
            key: call.key.clone(),
            kind: call.kind,
            signal: call.signal.clone(),
        }
    }

    /// The marker a turn saves when it takes patch `id`'s new branch.
    pub fn marker(id: &str) -> Self {
        Saved::new(CallKind::Step, Patch::marker_key(id))
    }

    /// The patch id when this is a patch's marker.
    pub fn marker_id(&self) -> Option<&str> {
        match self.kind {
            CallKind::Step => self.key.strip_prefix(PATCH_MARKER_PREFIX),
            _ => None,
        }
    }

    /// For reports: "step `charge`", "sleep `nap`", "signal `ok` (approval)".
    pub fn describe(&self) -> String {
        describe(self.kind, &self.key, self.signal.as_deref())
    }
}

/// "step `charge`", "signal `ok` (approval)".
pub(crate) fn describe(kind: CallKind, key: &str, signal: Option<&str>) -> String {
    match signal {
        Some(name) => format!("{kind} `{key}` ({name})"),
        None => format!("{kind} `{key}`"),
    }
}

/// [`Saved::describe`] of the entry `call` saves.
pub(crate) fn describe_call(call: &Call) -> String {
    describe(call.kind, &call.key, call.signal.as_deref())
}

/// Whether replay lets `call` take the position where `saved` was saved: equal kinds, matching
/// keys ([`key_matches`]) and, for signal waits, equal signal names when both are known.
pub fn call_matches(call: &Call, saved: &Saved) -> bool {
    call.kind == saved.kind
        && key_matches(&call.key, &saved.key)
        && match (&call.signal, &saved.signal) {
            (Some(a), Some(b)) if call.kind == CallKind::Signal => a == b,
            _ => true,
        }
}

/// Whether a call's key (or key pattern) matches a saved key: equal, or the pattern's
/// [`WILDCARD`]s stand for runs of the saved key's characters. A saved key that is itself a
/// pattern (enumerated from a grammar) matches only an equal pattern or `*`.
pub fn key_matches(key: &str, saved: &str) -> bool {
    if key == saved {
        return true;
    }
    if saved.contains(WILDCARD) {
        return key.chars().eq([WILDCARD]);
    }
    key.contains(WILDCARD) && glob(key, saved)
}

/// Whether `pattern` (with [`WILDCARD`] for any run of characters) matches all of `text`.
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // The last wildcard seen, and where in the text its run would end next.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let (pc, tc) = (p.get(pi), t.get(ti));
        if pc == Some(&WILDCARD) {
            star = Some((pi, ti));
            pi += 1;
        } else if pc.is_some() && pc == tc {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|c| *c == WILDCARD))
}

/// Whether a grammar accepts a saved prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acceptance<'g> {
    /// Some path of the grammar starts with the prefix.
    Accepted,
    /// No path does: where the longest match ends.
    Rejected(Divergence<'g>),
}

impl Acceptance<'_> {
    /// Whether the prefix is accepted.
    pub fn is_accepted(&self) -> bool {
        matches!(self, Acceptance::Accepted)
    }
}

/// Where a saved prefix leaves every path of a grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence<'g> {
    /// How many saved entries some path of the grammar matched before failing (the longest).
    pub matched: usize,
    /// The saved entry at that position.
    pub saved: Saved,
    /// What the grammar would call there instead (possible next calls, deduplicated, in
    /// grammar order), empty when every path ends there (and no patch marker can come there).
    pub expected: Vec<&'g Call>,
    /// The patches whose marker the grammar could save there instead, in grammar order. A
    /// marker is not a [`Call`] of the grammar, so it is listed here rather than in `expected`.
    pub markers: Vec<&'g Patch>,
}

/// Whether some path of `grammar` starts with `prefix` (every saved entry matched in order,
/// [`call_matches`]); the path may go on. An empty prefix is accepted.
pub fn accepts<'g>(grammar: &'g Node, prefix: &[Saved]) -> Acceptance<'g> {
    Matcher::new(grammar).accepts(prefix)
}

/// [`accepts`] for many prefixes against one grammar, its automaton built once.
struct Matcher<'g> {
    nfa: Nfa<'g>,
}

impl<'g> Matcher<'g> {
    /// The matcher of `grammar`.
    fn new(grammar: &'g Node) -> Self {
        Matcher {
            nfa: Nfa::new(grammar, None),
        }
    }

    /// [`accepts`].
    fn accepts(&self, prefix: &[Saved]) -> Acceptance<'g> {
        let mut current = self.nfa.closure(&[START]);
        for (index, saved) in prefix.iter().enumerate() {
            let moves = self.nfa.moves(&current);
            let targets = self.targets(&moves, saved);
            if targets.is_empty() {
                return Acceptance::Rejected(self.divergence(index, saved, &moves));
            }
            current = self.nfa.closure(&targets);
        }
        Acceptance::Accepted
    }

    /// The targets of the `moves` whose call matches `saved`.
    fn targets(&self, moves: &[(usize, usize)], saved: &Saved) -> Vec<usize> {
        moves
            .iter()
            .filter(|(label, _)| self.nfa.label(*label).is_some_and(|l| l.matches(saved)))
            .map(|&(_, target)| target)
            .collect()
    }

    /// The divergence at `index`, where `moves` were possible.
    fn divergence(&self, index: usize, saved: &Saved, moves: &[(usize, usize)]) -> Divergence<'g> {
        let mut expected: Vec<&'g Call> = Vec::new();
        let mut markers: Vec<&'g Patch> = Vec::new();
        for &(label, _) in moves {
            match self.nfa.label(label) {
                Some(Label::Call(call)) => {
                    let same = |c: &&Call| Saved::of_call(c) == Saved::of_call(call);
                    if !expected.iter().any(same) {
                        expected.push(call);
                    }
                }
                Some(Label::Marker(patch)) if !markers.iter().any(|p| p.id == patch.id) => {
                    markers.push(patch);
                }
                _ => {}
            }
        }
        Divergence {
            matched: index,
            saved: saved.clone(),
            expected,
            markers,
        }
    }
}

/// Every saved prefix a turn of `grammar` can be in flight with, shortest first (prefixes of
/// one length in grammar order), paths through loops unrolled at most `loop_unroll` times (the
/// pattern keys kept as patterns), deduplicated, at most `limit` prefixes. The empty prefix is
/// not listed. A patch's both branches are possible: its marker then its new branch, or its
/// old branch.
///
/// A grammar whose loops are nested so deep that unrolling them would take more than some
/// sixty thousand automaton states has its later loops unrolled fewer times (down to zero).
pub fn prefixes(grammar: &Node, loop_unroll: usize, limit: usize) -> Vec<Vec<Saved>> {
    let nfa = Nfa::new(grammar, Some(loop_unroll));
    let mut out: Vec<Vec<Saved>> = Vec::new();
    // Each prefix of the last length, by its index in `out`, with the states it leads to.
    let mut frontier: Vec<(Option<usize>, Vec<usize>)> = vec![(None, nfa.closure(&[START]))];
    while !frontier.is_empty() && out.len() < limit {
        let mut next = Vec::new();
        for (parent, states) in &frontier {
            for (saved, targets) in nfa.steps(states) {
                if out.len() >= limit {
                    break;
                }
                let mut prefix = parent.and_then(|i| out.get(i).cloned()).unwrap_or_default();
                prefix.push(saved);
                out.push(prefix);
                next.push((Some(out.len() - 1), nfa.closure(&targets)));
            }
        }
        frontier = next;
    }
    out
}

/// How a search through the saved prefixes of a grammar ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Search<T> {
    /// The shortest prefix sought, and what was found with it.
    Found(T),
    /// Every saved prefix was searched: none is sought.
    Exhausted,
    /// The search stopped at its limit before it could search every prefix.
    GaveUp,
}

/// The shortest saved prefix of `old` that `new` rejects ([`accepts`]), with where it
/// diverges. Prefixes are searched shortest first, in grammar order, with loops repeated any
/// number of times: a prefix that leads to the same positions in both grammars as one searched
/// before is not searched again, so the search ends. It gives up after `limit` such positions.
///
/// The prefix found is never longer than the first prefix of [`prefixes`] that `new` rejects.
pub fn first_rejected<'g>(
    old: &Node,
    new: &'g Node,
    limit: usize,
) -> Search<(Vec<Saved>, Divergence<'g>)> {
    let matcher = Matcher::new(new);
    let start = matcher.nfa.closure(&[START]);
    explore(old, limit, start, |prefix, saved, states| {
        let moves = matcher.nfa.moves(states);
        let targets = matcher.targets(&moves, saved);
        if targets.is_empty() {
            let divergence = matcher.divergence(prefix.len(), saved, &moves);
            let mut prefix = prefix.to_vec();
            prefix.push(saved.clone());
            return Advance::Stop((prefix, divergence));
        }
        Advance::Go(matcher.nfa.closure(&targets))
    })
}

/// The shortest saved prefix of `grammar` (loops repeated any number of times) whose last entry
/// satisfies `last`, searched as in [`first_rejected`], giving up after `limit` positions.
pub fn shortest_prefix(
    grammar: &Node,
    limit: usize,
    last: impl Fn(&Saved) -> bool,
) -> Search<Vec<Saved>> {
    explore(grammar, limit, (), |prefix, saved, ()| {
        if last(saved) {
            let mut prefix = prefix.to_vec();
            prefix.push(saved.clone());
            return Advance::Stop(prefix);
        }
        Advance::Go(())
    })
}

/// What [`explore`] does with a prefix one entry longer.
enum Advance<S, R> {
    /// Go on, with this companion state.
    Go(S),
    /// Stop the search: found.
    Stop(R),
}

/// Breadth first through the saved prefixes of `grammar`, each with a companion state that
/// `advance` computes from its parent's, or ends the search with. A prefix whose positions in
/// `grammar` and companion state were met before is not extended again.
fn explore<S, R>(
    grammar: &Node,
    limit: usize,
    start: S,
    mut advance: impl FnMut(&[Saved], &Saved, &S) -> Advance<S, R>,
) -> Search<R>
where
    S: Clone + Eq + std::hash::Hash,
{
    let nfa = Nfa::new(grammar, None);
    let mut seen: HashSet<(Vec<usize>, S)> = HashSet::new();
    let mut frontier = vec![(Vec::new(), nfa.closure(&[START]), start)];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for (prefix, states, state) in &frontier {
            for (saved, targets) in nfa.steps(states) {
                let state = match advance(prefix, &saved, state) {
                    Advance::Go(state) => state,
                    Advance::Stop(found) => return Search::Found(found),
                };
                let position = (nfa.closure(&targets), state);
                if seen.contains(&position) {
                    continue;
                }
                if seen.len() >= limit {
                    return Search::GaveUp;
                }
                seen.insert(position.clone());
                let mut longer: Vec<Saved> = prefix.clone();
                longer.push(saved);
                next.push((longer, position.0, position.1));
            }
        }
        frontier = next;
    }
    Search::Exhausted
}

/// What a transition of the automaton saves.
#[derive(Clone, Copy, Debug)]
enum Label<'g> {
    /// A durable call of the grammar.
    Call(&'g Call),
    /// A patch's marker.
    Marker(&'g Patch),
}

impl Label<'_> {
    /// Whether replay lets this call take the position of `saved`.
    fn matches(&self, saved: &Saved) -> bool {
        match self {
            Label::Call(call) => call_matches(call, saved),
            Label::Marker(patch) => saved.marker_id() == Some(patch.id.as_str()),
        }
    }

    /// The entry it saves.
    fn saved(&self) -> Saved {
        match self {
            Label::Call(call) => Saved::of_call(call),
            Label::Marker(patch) => Saved::marker(&patch.id),
        }
    }
}

/// The start state of an [`Nfa`].
const START: usize = 0;

/// How many states an unrolled automaton may have before loops are unrolled fewer times.
const UNROLL_BUDGET: usize = 1 << 16;

/// A grammar as a nondeterministic automaton over saved entries (Thompson's construction):
/// loops are cycles (or, unrolled, bounded copies), so following it always terminates.
struct Nfa<'g> {
    /// The epsilon transitions of each state.
    eps: Vec<Vec<usize>>,
    /// The labelled transitions of each state: (label index, target).
    edges: Vec<Vec<(usize, usize)>>,
    /// The labels, in grammar order (pre-order, a patch's marker before its branches).
    labels: Vec<Label<'g>>,
    /// How many times loops are unrolled; `None`: loops are cycles.
    unroll: Option<usize>,
}

impl<'g> Nfa<'g> {
    /// The automaton of `grammar`.
    fn new(grammar: &'g Node, unroll: Option<usize>) -> Self {
        let mut nfa = Nfa {
            eps: Vec::new(),
            edges: Vec::new(),
            labels: Vec::new(),
            unroll,
        };
        let start = nfa.state();
        nfa.build(grammar, start);
        nfa
    }

    /// A new state.
    fn state(&mut self) -> usize {
        self.eps.push(Vec::new());
        self.edges.push(Vec::new());
        self.eps.len() - 1
    }

    /// An epsilon transition.
    fn epsilon(&mut self, from: usize, to: usize) {
        if let Some(out) = self.eps.get_mut(from) {
            out.push(to);
        }
    }

    /// A transition saving `label` from `from` to a new state, returned.
    fn edge(&mut self, from: usize, label: Label<'g>) -> usize {
        let to = self.state();
        let index = self.labels.len();
        self.labels.push(label);
        if let Some(out) = self.edges.get_mut(from) {
            out.push((index, to));
        }
        to
    }

    /// The label with `index`.
    fn label(&self, index: usize) -> Option<Label<'g>> {
        self.labels.get(index).copied()
    }

    /// Add `node` starting at `from`; its end state.
    fn build(&mut self, node: &'g Node, from: usize) -> usize {
        match node {
            Node::Seq(items) | Node::Parallel(items) => {
                items.iter().fold(from, |at, item| self.build(item, at))
            }
            Node::Call(call) => self.edge(from, Label::Call(call)),
            Node::Alt(alt) => {
                let end = self.state();
                for arm in &alt.arms {
                    self.branch(arm, from, end);
                }
                end
            }
            Node::Patch(patch) => {
                let end = self.state();
                let start = self.state();
                self.epsilon(from, start);
                let marked = self.edge(start, Label::Marker(patch));
                let new_end = self.build(&patch.new, marked);
                self.epsilon(new_end, end);
                self.branch(&patch.old, from, end);
                end
            }
            Node::Loop(body) => match self.unroll {
                None => self.star(body, from),
                Some(times) => self.repeat(body, from, times),
            },
        }
    }

    /// `node` as one way from `from` to `end`.
    fn branch(&mut self, node: &'g Node, from: usize, end: usize) {
        let start = self.state();
        self.epsilon(from, start);
        let node_end = self.build(node, start);
        self.epsilon(node_end, end);
    }

    /// `body` zero or more times: a cycle.
    fn star(&mut self, body: &'g Node, from: usize) -> usize {
        let hub = self.state();
        self.epsilon(from, hub);
        let body_end = self.build(body, hub);
        self.epsilon(body_end, hub);
        let end = self.state();
        self.epsilon(hub, end);
        end
    }

    /// `body` zero to `times` times: copies.
    fn repeat(&mut self, body: &'g Node, from: usize, times: usize) -> usize {
        let end = self.state();
        self.epsilon(from, end);
        let mut at = from;
        for _ in 0..times {
            if self.eps.len() > UNROLL_BUDGET {
                break;
            }
            let start = self.state();
            self.epsilon(at, start);
            at = self.build(body, start);
            self.epsilon(at, end);
        }
        end
    }

    /// The states reachable from `seeds` by epsilon transitions (the seeds included), sorted.
    fn closure(&self, seeds: &[usize]) -> Vec<usize> {
        let mut seen = HashSet::new();
        let mut stack = seeds.to_vec();
        let mut out = Vec::new();
        while let Some(state) = stack.pop() {
            if !seen.insert(state) {
                continue;
            }
            out.push(state);
            if let Some(next) = self.eps.get(state) {
                stack.extend(next);
            }
        }
        out.sort_unstable();
        out
    }

    /// The labelled transitions out of `states`: (label index, target), in grammar order.
    fn moves(&self, states: &[usize]) -> Vec<(usize, usize)> {
        let mut moves: Vec<(usize, usize)> = states
            .iter()
            .filter_map(|s| self.edges.get(*s))
            .flatten()
            .copied()
            .collect();
        moves.sort_unstable();
        moves
    }

    /// The distinct entries that can be saved next from `states`, in grammar order, each with
    /// the states it leads to (before closure).
    fn steps(&self, states: &[usize]) -> Vec<(Saved, Vec<usize>)> {
        let mut steps: Vec<(Saved, Vec<usize>)> = Vec::new();
        let mut index: HashMap<Saved, usize> = HashMap::new();
        for (label, target) in self.moves(states) {
            let Some(saved) = self.label(label).map(|l| l.saved()) else {
                continue;
            };
            match index.get(&saved).and_then(|i| steps.get_mut(*i)) {
                Some((_, targets)) => targets.push(target),
                None => {
                    index.insert(saved.clone(), steps.len());
                    steps.push((saved, vec![target]));
                }
            }
        }
        steps
    }
}

/// The durable calls of `grammar`, in pre-order (a patch's new branch before its old one).
/// Patch markers are not calls of the grammar and are not listed.
pub fn calls(grammar: &Node) -> Vec<&Call> {
    let mut out = Vec::new();
    visit(grammar, &mut |node| {
        if let Node::Call(call) = node {
            out.push(call);
        }
    });
    out
}

/// The ids of the patches in `grammar`, in pre-order.
pub fn patch_ids(grammar: &Node) -> Vec<&str> {
    let mut out = Vec::new();
    visit(grammar, &mut |node| {
        if let Node::Patch(patch) = node {
            out.push(patch.id.as_str());
        }
    });
    out
}

/// Call `f` on `node` and every node under it, in pre-order.
pub(crate) fn visit<'g>(node: &'g Node, f: &mut impl FnMut(&'g Node)) {
    f(node);
    match node {
        Node::Seq(items) | Node::Parallel(items) => items.iter().for_each(|n| visit(n, f)),
        Node::Alt(alt) => alt.arms.iter().for_each(|n| visit(n, f)),
        Node::Loop(body) => visit(body, f),
        Node::Patch(patch) => {
            visit(&patch.new, f);
            visit(&patch.old, f);
        }
        Node::Call(_) => {}
    }
}

/// The first difference between two grammars' shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeDifference {
    /// Where, as a path (e.g. "call 3 (`charge`) in arm 2 of the `if` after step `check`"),
    /// and what the committed grammar has there against what the current one has.
    pub what: String,
    /// The `file:line` of the current grammar's node there, when there is one (or of the last
    /// call before it, when the current grammar has nothing there).
    pub at: Option<String>,
}

impl std::fmt::Display for ShapeDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.at {
            Some(at) => write!(f, "{} (at {at})", self.what),
            None => f.write_str(&self.what),
        }
    }
}

/// The first difference between the shapes of a `committed` grammar and the `current` one,
/// `None` when they have the same shape. Locations, input and condition fingerprints are not
/// shape; nested sequences are flattened first, so grouping is not a difference either.
pub fn first_difference(committed: &Node, current: &Node) -> Option<ShapeDifference> {
    diff_lists(&flatten(committed), &flatten(current), "")
}

/// `node` as a list of parts, nested sequences flattened.
fn flatten(node: &Node) -> Vec<&Node> {
    let mut out = Vec::new();
    push_flat(node, &mut out);
    out
}

/// Push `node`'s parts onto `out`, nested sequences flattened.
fn push_flat<'a>(node: &'a Node, out: &mut Vec<&'a Node>) {
    match node {
        Node::Seq(items) => items.iter().for_each(|item| push_flat(item, out)),
        other => out.push(other),
    }
}

/// A position in a list of parts being compared.
struct Place<'a> {
    /// The committed list.
    committed: &'a [&'a Node],
    /// The position.
    index: usize,
    /// Where the list is (" in arm 2 of …"), empty at the top.
    context: &'a str,
}

impl Place<'_> {
    /// "call 3 (`charge`)", "the loop at position 3" or (past the committed list's end)
    /// "position 3", with the context.
    fn name(&self) -> String {
        let n = self.index + 1;
        let name = match self.committed.get(self.index) {
            Some(Node::Call(call)) => format!("call {n} (`{}`)", call.key),
            Some(node) => format!("{} at position {n}", noun(node)),
            None => format!("position {n}"),
        };
        format!("{name}{}", self.context)
    }

    /// The context of a part of the node here: " in arm 2 of the `if` after step `a` …".
    fn inner(&self, node: &Node, part: &str) -> String {
        let anchor = match last_call(self.committed.get(..self.index).unwrap_or_default()) {
            Some(call) => format!(" after {}", describe_call(call)),
            None => format!(" at position {}", self.index + 1),
        };
        format!(" in {part} of {}{anchor}{}", noun(node), self.context)
    }

    /// A difference here: `what` the committed and current grammars have.
    fn differ(&self, committed: &str, current: &str, at: Option<String>) -> ShapeDifference {
        ShapeDifference {
            what: format!("{}: expected {committed}, found {current}", self.name()),
            at,
        }
    }
}

/// The last call of `nodes` in pre-order.
fn last_call<'a>(nodes: &[&'a Node]) -> Option<&'a Call> {
    nodes.iter().rev().find_map(|node| calls(node).pop())
}

/// "the `if`", "the loop", …: a node as a place.
fn noun(node: &Node) -> String {
    match node {
        Node::Alt(alt) if alt.arms.len() > 2 => "the `match`".into(),
        Node::Alt(_) => "the `if`".into(),
        Node::Loop(_) => "the loop".into(),
        Node::Parallel(_) => "the parallel group".into(),
        Node::Patch(patch) => format!("patch `{}`", patch.id),
        Node::Call(call) => describe_call(call),
        Node::Seq(_) => "the sequence".into(),
    }
}

/// "an `if` with 2 arms", "step `a`", …: a node as found.
fn summary(node: &Node) -> String {
    match node {
        Node::Alt(alt) => {
            let what = if alt.arms.len() > 2 {
                "a `match`"
            } else {
                "an `if`"
            };
            format!("{what} with {} arms", alt.arms.len())
        }
        Node::Loop(_) => "a loop".into(),
        Node::Parallel(members) => format!("a parallel group of {}", members.len()),
        Node::Patch(patch) => format!("patch `{}`", patch.id),
        Node::Call(call) => describe_call(call),
        Node::Seq(items) => format!("a sequence of {}", items.len()),
    }
}

/// The first `file:line` in `node` (a call's or a patch's), in pre-order.
fn first_at(node: &Node) -> Option<String> {
    let mut found = None;
    visit(node, &mut |n| {
        let at = match n {
            Node::Call(call) => call.at.as_str(),
            Node::Patch(patch) => patch.at.as_str(),
            _ => "",
        };
        if found.is_none() && !at.is_empty() {
            found = Some(at.to_string());
        }
    });
    found
}

/// The first difference between two lists of parts.
fn diff_lists(committed: &[&Node], current: &[&Node], context: &str) -> Option<ShapeDifference> {
    (0..committed.len().max(current.len())).find_map(|index| {
        let place = Place {
            committed,
            index,
            context,
        };
        match (committed.get(index), current.get(index)) {
            (Some(a), Some(b)) => diff_nodes(a, b, &place),
            (Some(a), None) => {
                let before = last_call(current).map(|c| c.at.clone());
                Some(place.differ(&summary(a), "nothing", before.filter(|at| !at.is_empty())))
            }
            (None, Some(b)) => Some(place.differ("nothing", &summary(b), first_at(b))),
            (None, None) => None,
        }
    })
}

/// The first difference between two parts at `place`.
fn diff_nodes(a: &Node, b: &Node, place: &Place<'_>) -> Option<ShapeDifference> {
    let differ = || Some(place.differ(&summary(a), &summary(b), first_at(b)));
    match (a, b) {
        (Node::Call(x), Node::Call(y)) => diff_calls(x, y, place),
        (Node::Alt(x), Node::Alt(y)) if x.arms.len() == y.arms.len() => {
            diff_members(&x.arms, &y.arms, |j| place.inner(a, &format!("arm {j}")))
        }
        (Node::Loop(x), Node::Loop(y)) => {
            diff_lists(&flatten(x), &flatten(y), &place.inner(a, "the body"))
        }
        (Node::Parallel(x), Node::Parallel(y)) if x.len() == y.len() => {
            diff_members(x, y, |j| place.inner(a, &format!("member {j}")))
        }
        (Node::Patch(x), Node::Patch(y)) if x.id == y.id => {
            let new = place.inner(a, "the new branch");
            let old = place.inner(a, "the old branch");
            diff_lists(&flatten(&x.new), &flatten(&y.new), &new)
                .or_else(|| diff_lists(&flatten(&x.old), &flatten(&y.old), &old))
        }
        _ => differ(),
    }
}

/// The first difference between two calls at `place`.
fn diff_calls(a: &Call, b: &Call, place: &Place<'_>) -> Option<ShapeDifference> {
    let at = Some(b.at.clone()).filter(|at| !at.is_empty());
    if Saved::of_call(a) != Saved::of_call(b) {
        return Some(place.differ(&describe_call(a), &describe_call(b), at));
    }
    if a.call != b.call {
        let with = |c: &Call| format!("{} made with `{}`", describe_call(c), c.call);
        return Some(place.differ(&with(a), &with(b), at));
    }
    None
}

/// The first difference between the members (arms) of two nodes, numbered from 1 for `context`.
fn diff_members(
    a: &[Node],
    b: &[Node],
    context: impl Fn(usize) -> String,
) -> Option<ShapeDifference> {
    a.iter()
        .zip(b)
        .enumerate()
        .find_map(|(j, (x, y))| diff_lists(&flatten(x), &flatten(y), &context(j + 1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Alt;

    fn call(kind: CallKind, key: &str, line: u32) -> Node {
        Node::Call(Call::new(kind, key, format!("src/order.rs:{line}")))
    }

    fn step(key: &str) -> Node {
        call(CallKind::Step, key, 1)
    }

    fn sleep(key: &str) -> Node {
        call(CallKind::Sleep, key, 1)
    }

    fn wait(key: &str, signal: &str) -> Node {
        Node::Call(Call::new(CallKind::Signal, key, "src/order.rs:1").signal(signal))
    }

    fn alt(arms: Vec<Node>) -> Node {
        Node::Alt(Alt {
            cond: "c".into(),
            arms,
        })
    }

    fn looped(body: Node) -> Node {
        Node::Loop(Box::new(body))
    }

    fn patch(id: &str, new: Node, old: Node) -> Node {
        Node::Patch(Patch {
            id: id.into(),
            new: Box::new(new),
            old: Box::new(old),
            at: "src/order.rs:9".into(),
        })
    }

    fn s(key: &str) -> Saved {
        Saved::new(CallKind::Step, key)
    }

    fn z(key: &str) -> Saved {
        Saved::new(CallKind::Sleep, key)
    }

    fn rejected<'g>(grammar: &'g Node, prefix: &[Saved]) -> Divergence<'g> {
        match accepts(grammar, prefix) {
            Acceptance::Rejected(d) => d,
            Acceptance::Accepted => panic!("{prefix:?} accepted"),
        }
    }

    fn keys(calls: &[&Call]) -> Vec<String> {
        calls.iter().map(|c| c.key.clone()).collect()
    }

    #[test]
    fn describes_entries() {
        assert_eq!(s("charge").describe(), "step `charge`");
        assert_eq!(z("nap").describe(), "sleep `nap`");
        let ok = Saved::new(CallKind::Signal, "ok").signal("approval");
        assert_eq!(ok.describe(), "signal `ok` (approval)");
        assert_eq!(Saved::marker("p").marker_id(), Some("p"));
        assert_eq!(s("charge").marker_id(), None);
    }

    #[test]
    fn keys_match_literally_or_by_pattern() {
        assert!(key_matches("item-*", "item-3"));
        assert!(key_matches("item-*", "item-"));
        assert!(key_matches("*", "anything"));
        assert!(key_matches("a*b*c", "a-x-b-y-c"));
        assert!(!key_matches("a*b*c", "a-x-b-y-d"));
        assert!(!key_matches("item-*", "row-3"));
        assert!(!key_matches("item", "item-3"));
        // A saved pattern matches only the same pattern or `*`.
        assert!(key_matches("item-*", "item-*"));
        assert!(key_matches("*", "item-*"));
        assert!(!key_matches("it*", "item-*"));
        assert!(!key_matches("item-3", "item-*"));
    }

    #[test]
    fn signals_match_by_name_when_both_are_known() {
        let g = wait("ok", "approval");
        let named = |n: &str| Saved::new(CallKind::Signal, "ok").signal(n);
        assert!(accepts(&g, &[named("approval")]).is_accepted());
        assert!(accepts(&g, &[Saved::new(CallKind::Signal, "ok")]).is_accepted());
        assert_eq!(rejected(&g, &[named("refusal")]).matched, 0);
        let unnamed = Node::Call(Call::new(CallKind::Signal, "ok", ""));
        assert!(accepts(&unnamed, &[named("refusal")]).is_accepted());
    }

    #[test]
    fn sequences_accept_their_prefixes_only() {
        let g = Node::Seq(vec![step("a"), Node::Seq(vec![sleep("nap"), step("b")])]);
        assert!(accepts(&g, &[]).is_accepted());
        assert!(accepts(&g, &[s("a"), z("nap")]).is_accepted());
        assert!(accepts(&g, &[s("a"), z("nap"), s("b")]).is_accepted());
        let d = rejected(&g, &[s("a"), s("b")]);
        assert_eq!((d.matched, d.saved.clone()), (1, s("b")));
        assert_eq!(keys(&d.expected), ["nap"]);
        // Past the end every path ends: nothing expected.
        let d = rejected(&g, &[s("a"), z("nap"), s("b"), s("c")]);
        assert_eq!(d.matched, 3);
        assert!(d.expected.is_empty() && d.markers.is_empty());
        // A kind is part of the match.
        assert_eq!(rejected(&g, &[z("a")]).matched, 0);
    }

    #[test]
    fn alternatives_accept_any_arm_and_report_the_longest_match() {
        let g = Node::Seq(vec![
            step("a"),
            alt(vec![
                Node::Seq(vec![step("b"), step("c")]),
                step("d"),
                Node::Seq(vec![]),
            ]),
            sleep("nap"),
        ]);
        assert!(accepts(&g, &[s("a"), s("b"), s("c"), z("nap")]).is_accepted());
        assert!(accepts(&g, &[s("a"), s("d"), z("nap")]).is_accepted());
        assert!(accepts(&g, &[s("a"), z("nap")]).is_accepted());
        let d = rejected(&g, &[s("a"), s("b"), s("d")]);
        assert_eq!(d.matched, 2);
        assert_eq!(keys(&d.expected), ["c"]);
        let d = rejected(&g, &[s("a"), s("x")]);
        assert_eq!(keys(&d.expected), ["b", "d", "nap"]);
    }

    #[test]
    fn loops_repeat_any_number_of_times_with_patterns() {
        let g = Node::Seq(vec![
            looped(Node::Seq(vec![step("item-*"), sleep("pause-*")])),
            step("done"),
        ]);
        assert!(accepts(&g, &[s("done")]).is_accepted());
        let many: Vec<Saved> = (0..50)
            .flat_map(|i| [s(&format!("item-{i}")), z(&format!("pause-{i}"))])
            .chain([s("done")])
            .collect();
        assert!(accepts(&g, &many).is_accepted());
        let d = rejected(&g, &[s("item-1"), s("item-2")]);
        assert_eq!(
            (d.matched, keys(&d.expected)),
            (1, vec!["pause-*".to_string()])
        );
        assert!(accepts(&g, &[s("item-*"), z("pause-*")]).is_accepted());
    }

    #[test]
    fn nested_and_empty_loops_terminate() {
        let empty = looped(looped(Node::Seq(vec![])));
        let g = Node::Seq(vec![
            empty.clone(),
            looped(Node::Seq(vec![looped(step("a-*")), empty, step("b-*")])),
            looped(alt(vec![Node::Seq(vec![]), looped(Node::Seq(vec![]))])),
            sleep("end"),
        ]);
        let saved = [
            s("a-1"),
            s("a-2"),
            s("b-1"),
            s("b-2"),
            s("a-3"),
            s("b-3"),
            z("end"),
        ];
        assert!(accepts(&g, &saved).is_accepted());
        let d = rejected(&g, &[s("a-1"), z("end")]);
        assert_eq!(
            (d.matched, keys(&d.expected)),
            (1, vec!["a-*".into(), "b-*".into()])
        );
        assert!(!prefixes(&g, 2, 100).is_empty());
        assert_eq!(
            prefixes(&looped(looped(Node::Seq(vec![]))), 3, 100),
            Vec::<Vec<Saved>>::new()
        );
    }

    #[test]
    fn parallel_members_are_saved_in_declaration_order() {
        let g = Node::Seq(vec![
            Node::Parallel(vec![step("a"), step("b")]),
            sleep("nap"),
        ]);
        assert!(accepts(&g, &[s("a"), s("b"), z("nap")]).is_accepted());
        let d = rejected(&g, &[s("b")]);
        assert_eq!(keys(&d.expected), ["a"]);
    }

    #[test]
    fn patches_accept_the_old_branch_or_the_marker_and_the_new_one() {
        let g = Node::Seq(vec![
            step("a"),
            patch("p", step("new"), step("old")),
            sleep("nap"),
        ]);
        assert!(accepts(&g, &[s("a"), s("old"), z("nap")]).is_accepted());
        assert!(accepts(&g, &[s("a"), Saved::marker("p"), s("new"), z("nap")]).is_accepted());
        let d = rejected(&g, &[s("a"), Saved::marker("p"), s("old")]);
        assert_eq!((d.matched, keys(&d.expected)), (2, vec!["new".to_string()]));
        let d = rejected(&g, &[s("a"), s("new")]);
        assert_eq!(keys(&d.expected), ["old"]);
        assert_eq!(
            d.markers.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            ["p"]
        );
    }

    #[test]
    fn expected_calls_are_deduplicated_in_grammar_order() {
        let g = alt(vec![
            step("b"),
            step("a"),
            call(CallKind::Step, "b", 7),
            sleep("b"),
        ]);
        let d = rejected(&g, &[s("x")]);
        let found: Vec<String> = d.expected.iter().map(|c| describe_call(c)).collect();
        assert_eq!(found, ["step `b`", "step `a`", "sleep `b`"]);
        assert_eq!(d.expected[0].at, "src/order.rs:1");
    }

    #[test]
    fn prefixes_are_shortest_first_deduplicated_and_unrolled() {
        let g = Node::Seq(vec![
            step("a"),
            alt(vec![step("b"), step("b"), sleep("c")]),
            looped(step("item-*")),
            patch("p", step("new"), Node::Seq(vec![])),
        ]);
        let all = prefixes(&g, 2, 100);
        let shown: Vec<String> = all
            .iter()
            .map(|p| {
                p.iter()
                    .map(|e| e.key.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        assert_eq!(
            shown,
            [
                "a",
                "a b",
                "a c",
                "a b item-*",
                "a b patched.p",
                "a c item-*",
                "a c patched.p",
                "a b item-* item-*",
                "a b item-* patched.p",
                "a b patched.p new",
                "a c item-* item-*",
                "a c item-* patched.p",
                "a c patched.p new",
                "a b item-* item-* patched.p",
                "a b item-* patched.p new",
                "a c item-* item-* patched.p",
                "a c item-* patched.p new",
                "a b item-* item-* patched.p new",
                "a c item-* item-* patched.p new",
            ]
        );
        assert!(all.iter().all(|p| accepts(&g, p).is_accepted()));
        assert_eq!(prefixes(&g, 2, 5).len(), 5);
        assert_eq!(prefixes(&g, 0, 100).len(), 7);
        assert!(prefixes(&Node::Seq(vec![]), 2, 100).is_empty());
    }

    /// A small deterministic generator of grammars (a linear congruential generator).
    struct Gen(u64);

    impl Gen {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % n
        }

        fn node(&mut self, depth: u32) -> Node {
            let keys = ["a", "b", "c", "i-*", "*"];
            let pick = if depth == 0 { 0 } else { self.next(6) };
            match pick {
                0 | 1 => {
                    let key = keys[self.next(keys.len() as u64) as usize];
                    let kind = [CallKind::Step, CallKind::Sleep][self.next(2) as usize];
                    call(kind, key, 1)
                }
                2 => Node::Seq((0..self.next(4)).map(|_| self.node(depth - 1)).collect()),
                3 => alt((0..self.next(3)).map(|_| self.node(depth - 1)).collect()),
                4 => looped(self.node(depth - 1)),
                _ => patch("p", self.node(depth - 1), self.node(depth - 1)),
            }
        }
    }

    #[test]
    fn first_rejected_agrees_with_enumerated_prefixes() {
        let mut gen = Gen(7);
        let (mut found, mut agreed) = (0, 0);
        for _ in 0..400 {
            let (old, new) = (gen.node(4), gen.node(4));
            let enumerated = prefixes(&old, 2, 10_000)
                .into_iter()
                .find(|p| !accepts(&new, p).is_accepted());
            match (first_rejected(&old, &new, 100_000), enumerated) {
                (Search::Found((prefix, d)), enumerated) => {
                    found += 1;
                    assert!(accepts(&old, &prefix).is_accepted());
                    assert_eq!(accepts(&new, &prefix), Acceptance::Rejected(d));
                    // Of one length, the order may differ where loops repeat (the unrolled
                    // copies of a loop come later in grammar order than the loop itself).
                    if let Some(e) = enumerated {
                        assert!(prefix.len() <= e.len(), "{old:?} {new:?}");
                        agreed += usize::from(prefix == e);
                    }
                }
                (Search::Exhausted, enumerated) => assert_eq!(enumerated, None, "{old:?} {new:?}"),
                (Search::GaveUp, _) => panic!("gave up on {old:?}"),
            }
            let _ = first_difference(&old, &new);
            let (m, n) = (
                crate::Manifest::new("w", "v1", old.clone()),
                crate::Manifest::new("w", "v1", new.clone()),
            );
            let c = crate::compat::compare(&m, &n);
            assert_eq!(c.class == crate::compat::Class::Safe, c.findings.is_empty());
            assert!(crate::compat::render_text(&c).starts_with("w v1 → v1: "));
        }
        assert!(found > 100 && agreed > 100, "{found} {agreed}");
    }

    #[test]
    fn first_rejected_goes_past_what_enumeration_reaches() {
        let branches = |last: &str| {
            let mut items: Vec<Node> = (0..20)
                .map(|i| alt((0..3).map(|j| step(&format!("k{i}-{j}"))).collect()))
                .collect();
            items.push(looped(Node::Seq(vec![step("i-*"), looped(step("j-*"))])));
            items.push(step(last));
            Node::Seq(items)
        };
        let (old, new) = (branches("end"), branches("fin"));
        assert!(prefixes(&old, 2, 10_000)
            .iter()
            .all(|p| accepts(&new, p).is_accepted()));
        let Search::Found((prefix, d)) = first_rejected(&old, &new, 10_000) else {
            panic!("not found");
        };
        assert_eq!(prefix.len(), 21);
        assert_eq!(prefix.last(), Some(&s("end")));
        assert_eq!(keys(&d.expected), ["i-*", "fin"]);
        assert_eq!(first_rejected(&old, &old, 10_000), Search::Exhausted);
        assert_eq!(first_rejected(&old, &new, 5), Search::GaveUp);
    }

    #[test]
    fn first_rejected_repeats_loops_as_often_as_needed() {
        // The new code allows at most two repetitions: the third is rejected.
        let old = looped(step("i-*"));
        let opt = || alt(vec![step("i-*"), Node::Seq(vec![])]);
        let new = Node::Seq(vec![opt(), opt()]);
        let Search::Found((prefix, d)) = first_rejected(&old, &new, 100) else {
            panic!("not found");
        };
        assert_eq!(prefix, [s("i-*"), s("i-*"), s("i-*")]);
        assert_eq!(d.matched, 2);
    }

    #[test]
    fn shortest_prefix_finds_the_first_way_to_an_entry() {
        let g = Node::Seq(vec![
            step("a"),
            alt(vec![Node::Seq(vec![step("b"), sleep("nap")]), sleep("nap")]),
            looped(step("i-*")),
        ]);
        let found = shortest_prefix(&g, 100, |e| e.kind == CallKind::Sleep);
        assert_eq!(found, Search::Found(vec![s("a"), z("nap")]));
        assert_eq!(
            shortest_prefix(&g, 100, |e| e.key == "zzz"),
            Search::Exhausted
        );
    }

    #[test]
    fn deep_loop_nests_are_unrolled_within_a_budget() {
        let mut g = step("x-*");
        for _ in 0..40 {
            g = looped(Node::Seq(vec![g, step("y-*")]));
        }
        let all = prefixes(&g, 2, 50);
        assert_eq!(all.len(), 50);
        assert!(all.windows(2).all(|w| w[0].len() <= w[1].len()));
    }

    #[test]
    fn calls_and_patch_ids_in_pre_order() {
        let g = Node::Seq(vec![
            step("a"),
            patch("p", step("new"), patch("q", step("x"), step("old"))),
            looped(step("i-*")),
        ]);
        assert_eq!(keys(&calls(&g)), ["a", "new", "x", "old", "i-*"]);
        assert_eq!(patch_ids(&g), ["p", "q"]);
    }

    #[test]
    fn first_difference_ignores_locations_fingerprints_and_grouping() {
        let committed = Node::Seq(vec![
            step("a"),
            Node::Seq(vec![step("b"), alt(vec![step("c"), Node::Seq(vec![])])]),
        ]);
        let current = Node::Seq(vec![
            Node::Call(Call::new(CallKind::Step, "a", "src/x.rs:99").input("changed")),
            step("b"),
            Node::Alt(Alt {
                cond: "other".into(),
                arms: vec![
                    Node::Seq(vec![Node::Seq(vec![call(CallKind::Step, "c", 5)])]),
                    Node::Seq(vec![]),
                ],
            }),
        ]);
        assert_eq!(first_difference(&committed, &current), None);
        assert_eq!(
            first_difference(&step("a"), &Node::Seq(vec![step("a")])),
            None
        );
    }

    #[test]
    fn first_difference_finds_a_rename() {
        let committed = Node::Seq(vec![step("a"), step("b"), step("charge")]);
        let current = Node::Seq(vec![
            step("a"),
            step("b"),
            call(CallKind::Step, "charge-card", 7),
        ]);
        let d = first_difference(&committed, &current).unwrap();
        assert_eq!(
            d.what,
            "call 3 (`charge`): expected step `charge`, found step `charge-card`"
        );
        assert_eq!(d.at.as_deref(), Some("src/order.rs:7"));
    }

    #[test]
    fn first_difference_finds_an_insert_in_an_arm() {
        let committed = Node::Seq(vec![step("check"), alt(vec![step("a"), Node::Seq(vec![])])]);
        let current = Node::Seq(vec![
            step("check"),
            alt(vec![step("a"), call(CallKind::Sleep, "nap", 8)]),
        ]);
        let d = first_difference(&committed, &current).unwrap();
        assert_eq!(
            d.what,
            "position 1 in arm 2 of the `if` after step `check`: expected nothing, found sleep `nap`"
        );
        assert_eq!(d.at.as_deref(), Some("src/order.rs:8"));
        let inserted = Node::Seq(vec![
            step("check"),
            call(CallKind::Step, "x", 4),
            alt(vec![step("a"), Node::Seq(vec![])]),
        ]);
        let d = first_difference(&committed, &inserted).unwrap();
        assert_eq!(
            d.what,
            "the `if` at position 2: expected an `if` with 2 arms, found step `x`"
        );
        assert_eq!(d.at.as_deref(), Some("src/order.rs:4"));
    }

    #[test]
    fn first_difference_finds_a_kind_change_in_a_loop() {
        let committed = Node::Seq(vec![
            step("a"),
            looped(Node::Seq(vec![step("item-*"), step("b")])),
        ]);
        let current = Node::Seq(vec![
            step("a"),
            looped(Node::Seq(vec![
                step("item-*"),
                call(CallKind::Sleep, "b", 3),
            ])),
        ]);
        let d = first_difference(&committed, &current).unwrap();
        assert_eq!(
            d.what,
            "call 2 (`b`) in the body of the loop after step `a`: expected step `b`, found sleep `b`"
        );
        assert_eq!(d.at.as_deref(), Some("src/order.rs:3"));
        // A call removed at the end points at the last call before it.
        let shorter = Node::Seq(vec![call(CallKind::Step, "a", 2)]);
        let d = first_difference(&committed, &shorter).unwrap();
        assert_eq!(
            d.what,
            "the loop at position 2: expected a loop, found nothing"
        );
        assert_eq!(d.at.as_deref(), Some("src/order.rs:2"));
    }

    #[test]
    fn first_difference_sees_methods_patches_and_members() {
        let transact = Node::Call(Call::new(CallKind::Step, "a", "").call("transact"));
        let plain = Node::Call(Call::new(CallKind::Step, "a", "").call("step"));
        let d = first_difference(&plain, &transact).unwrap();
        assert!(d.what.contains("made with `transact`"), "{}", d.what);
        let p = patch("p", step("n"), step("o"));
        let q = patch("p", step("n"), step("other"));
        let d = first_difference(&p, &q).unwrap();
        assert!(
            d.what
                .contains("in the old branch of patch `p` at position 1"),
            "{}",
            d.what
        );
        let two = Node::Parallel(vec![step("a"), step("b")]);
        let three = Node::Parallel(vec![step("a"), step("x"), step("b")]);
        let d = first_difference(&two, &three).unwrap();
        assert!(d.what.contains("a parallel group of 3"), "{}", d.what);
    }
}
