// Package run is where TestExamplesPrint runs the examples of the root
// module's packages: it lays each package's external test files over this
// directory in turn, with a SQLite driver linked in. It has no code of its
// own.
package run
