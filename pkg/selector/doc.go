// Package selector decides which skills act on a trigger, and why: it is the
// routing decision, kept pure (no NATS) so the router process, `skillbus route` and
// `skillbus route eval` run the same code. (It was called route, which read as a typo
// of router, the process that feeds it.)
//
// A decision has two phases. Recall gathers candidates, each with the source that
// found it and why: explicit invocation ($name, @name, "使用 name skill", the skill
// extension or subject), rules (the event type, exactly or by a pattern with * and >;
// a skill's phrases — its triggers that are not patterns, and its examples.positive —
// found in the text on word boundaries), the BM25 keyword index (name, description, tags, triggers,
// capabilities and examples, stemmed, without stop words, tolerant of one-letter
// typos, with adjacent word pairs and a table of everyday synonyms), and optional outside sources passed in (embeddings, a chat model).
//
// Scoring weighs intent (the best normalised similarity of any source), trigger
// (1.0 named, 0.9 rule, 0.6 recalled otherwise), success rate (terminal results of
// the skill version, Laplace-smoothed so no evidence is 0.5), context readiness
// (required inputs present in the data, required tools served), cost (low 1, medium
// .5, high 0) and conflict (-1 when an anti-trigger is in the text; such a skill is not selected by score), with
// DefaultScoreWeights; a skill whose pool no live worker serves has its score
// halved. Candidates at or above the threshold are selected, at most MaxActive; the
// best is the primary, consecutive parallel_safe skills form groups of at most two,
// and the rest form the fallback chain. Explicitly invoked skills are selected
// whatever their score, and a skill that lists the trigger's type is subscribed to it:
// it is selected whatever its score, as event-driven routing always was. Without text,
// subscribers are ordered by priority first, then score.
package selector
