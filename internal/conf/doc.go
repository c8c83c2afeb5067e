// Package conf splits the lines of redis.conf-style files, the config file
// (--config) and ACL files, into arguments, with the rules of Redis's
// sdssplitargs (src/sds.c), so that a line Redis accepts gives the same
// arguments here and a line Redis refuses is refused.
//
// The rules:
//   - Arguments are separated by blanks. Blanks before an argument are
//     those of C's isspace: space, \t, \n, \v, \f, \r. An unquoted
//     argument ends at a space, \t, \n or \r only: \v and \f are part of
//     it, as in Redis.
//   - "Double quotes" take the escapes \n \r \t \b \a, \xHH (two hex
//     digits, either case) for that byte, and \ before any other
//     character for that character (\\, \", \q is q). \x not followed by
//     two hex digits is x.
//   - 'Single quotes' take \' only; any other backslash is itself.
//   - A quote may open in the middle of an unquoted argument (a"b c" is
//     one argument, ab c); a closing quote must be followed by a blank or
//     the end of the line ("a"b is refused).
//   - An unclosed quote is refused (ErrUnbalancedQuotes).
//   - A NUL byte ends the line, as it ends Redis's C string.
//
// Usage:
//
//	args, err := conf.Split(`user alice on ">pass word" ~cache:*`)
//	// args: user, alice, on, >pass word, ~cache:*
//
// SplitComment is Split for the config file, which also allows a comment
// after the arguments; Redis has none, and refuses such a line.
package conf
