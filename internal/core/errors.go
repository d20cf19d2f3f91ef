package core

import "fmt"

// FieldError says which field had which value and what is allowed. Every
// validation error in gpufleet is one, possibly wrapped with a location.
type FieldError struct {
	Field   string
	Value   string
	Allowed string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: invalid value %q: want %s", e.Field, e.Value, e.Allowed)
}
