package cli

// StartRetry exposes startRetry to the tests.
var StartRetry = startRetry

// Banner exposes banner to the tests.
var Banner = banner
