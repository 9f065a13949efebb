puts `git rev-list --count HEAD`
