// Package repair fixes skills broken by a changed API or a typo: from a diagnosis
// of a repairable failure (a failure.Fault: what name was missing or misspelt and
// which names the run-time value had) it proposes a patch to the skill's files, as
// a unified diff, checks it against a budget and the registry's validation, and
// keeps the state of each repair.
//
// It is the pure core, without NATS: package repair/service runs it as the repair
// workers of a fleet, and the Actions of this package (list, show, approve, reject)
// are what `skillbus repair` and other front ends call.
//
// # Repairers
//
// Deterministic repairers come first, each for one kind of fault:
//
//   - reference: a key or attribute the value does not have becomes the nearest
//     name it has (steps.fetch.result.titel → title);
//   - unknown_filter: a filter that does not exist becomes the nearest filter;
//   - path: a relative path that is no file of the skill becomes the nearest one
//     that is;
//   - parameter: an argument a tool refused (HTTP 400/422 naming a field) becomes
//     the nearest name it asked for, or a missing argument that the skill declares as
//     an input with a default is passed that input.
//
// When none applies and a chat model is configured, Chat asks it for a unified diff,
// giving it the skill's files, the diagnosis and the error; the answer is parsed
// strictly (one diff, only existing files of the skill, exact context).
//
// # Automatic repair
//
// A skill with repair: auto has its patches applied without a person, except a patch
// that Guarded finds changing what the skill may do (its permissions, tools,
// confirmations, repair mode, ...) rather than its workflow's steps, and one whose
// Held names are new to the skill and chosen by the sender of a trigger (Chosen:
// the trigger's data and what the skill could decode from it). Those wait for
// approval.
//
// # Budget
//
// Every repair of one skill and fault is bounded by a Budget: by default 2 attempts,
// 3 files and 8 hunks. A patch over the budget is refused before it is validated.
package repair
