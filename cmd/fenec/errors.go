package main

import "errors"

// errUsage is a mistake in the command line: exit status 2.
var errUsage = errors.New("usage")
