// Package plural counts things in English: "1 host", "2 hosts",
// "1 NVSwitch", "4 NVSwitches", so that no message says "1 hosts" or
// "GPU(s)".
package plural

import (
	"strconv"
	"strings"
)

// N is n and word, in the plural unless n is 1: N(1, "GPU") is "1 GPU",
// N(8, "GPU") "8 GPUs", N(0, "entry") "0 entries".
func N(n int, word string) string {
	return strconv.Itoa(n) + " " + Word(n, word)
}

// Word is word in the plural unless n is 1.
func Word(n int, word string) string {
	if n == 1 {
		return word
	}
	return Of(word)
}

// Of is the plural of a (regular) English noun: +es after s, x, z, ch and
// sh, -y to -ies after a consonant, else +s.
func Of(word string) string {
	l := strings.ToLower(word)
	switch {
	case strings.HasSuffix(l, "s"), strings.HasSuffix(l, "x"), strings.HasSuffix(l, "z"),
		strings.HasSuffix(l, "ch"), strings.HasSuffix(l, "sh"):
		return word + "es"
	case len(l) > 1 && l[len(l)-1] == 'y' && !strings.ContainsRune("aeiou", rune(l[len(l)-2])):
		return word[:len(word)-1] + "ies"
	}
	return word + "s"
}

// Verb is the verb that agrees with n things: one (the third person
// singular, "has", "binds") when n is 1, else many ("have", "bind").
func Verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
