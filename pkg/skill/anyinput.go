package skill

// AnyInput is the name of a workflow input that accepts every field the skill does not
// declare: `- name: "*"`. Without it, a skill that declares inputs rejects a trigger
// whose data has a field it does not declare, naming the field and the declared name
// it most resembles, so a typo in a publisher fails loudly instead of being ignored.
const AnyInput = "*"

// Closest returns the candidate most like s, or "" when none is close enough to be a
// plausible typo.
func Closest(s string, candidates []string) string { return closest(s, candidates) }
