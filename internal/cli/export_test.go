package cli

// StartRetry exposes startRetry to the tests.
var StartRetry = startRetry
