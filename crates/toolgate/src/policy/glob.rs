//! Glob patterns over `server/tool` names (`*`, `?`), and pattern lists with `!` exclusions.

/// One glob: `*` matches any run of characters (slashes included), `?` exactly one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(String);

impl Glob {
    pub fn new(pattern: &str) -> Self {
        Self(pattern.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Iterative matching with one backtrack point: linear in practice, never exponential,
    /// so a hostile pattern in a config file cannot stall a request. ASCII names (the usual
    /// case) are matched on bytes without allocating.
    pub fn matches(&self, text: &str) -> bool {
        if self.0.is_ascii() && text.is_ascii() {
            return match_slices(self.0.as_bytes(), text.as_bytes(), b'*', b'?');
        }
        let p: Vec<char> = self.0.chars().collect();
        let t: Vec<char> = text.chars().collect();
        match_slices(&p, &t, '*', '?')
    }

    /// How specific a pattern is (its literal characters): the most specific rule wins.
    pub fn specificity(&self) -> usize {
        self.0.chars().filter(|&c| c != '*' && c != '?').count()
    }
}

fn match_slices<T: PartialEq + Copy>(p: &[T], t: &[T], star_sym: T, one: T) -> bool {
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] != star_sym && (p[pi] == one || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == star_sym {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == star_sym)
}

/// A list like `["github/*", "!github/delete_*"]`: a name matches when some plain entry
/// matches it (or there is none) and no `!` entry does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatternList {
    include: Vec<Glob>,
    exclude: Vec<Glob>,
}

impl PatternList {
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Self {
        let mut list = Self::default();
        for e in entries {
            match e.as_ref().strip_prefix('!') {
                Some(rest) => list.exclude.push(Glob::new(rest)),
                None => list.include.push(Glob::new(e.as_ref())),
            }
        }
        list
    }

    /// Whether the list names anything at all (an empty list filters nothing).
    /// The entries as written: the plain ones, then the `!` ones.
    pub fn entries(&self) -> Vec<String> {
        let plain = self.include.iter().map(|g| g.as_str().to_string());
        plain
            .chain(self.exclude.iter().map(|g| format!("!{}", g.as_str())))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }

    /// Whether `entry` is written as a plain entry, exactly (not matched by a glob).
    pub fn names(&self, entry: &str) -> bool {
        self.include.iter().any(|g| g.as_str() == entry)
    }

    /// Whether there is at least one plain (non-`!`) entry.
    pub fn has_includes(&self) -> bool {
        !self.include.is_empty()
    }

    pub fn matches(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|g| g.matches(name)))
            && !self.exclude.iter().any(|g| g.matches(name))
    }

    /// For sets of labels (tags, hints): some plain entry is present (or there is none)
    /// and no `!` entry is.
    pub fn matches_any(&self, labels: &[&str]) -> bool {
        let has = |g: &Glob| labels.iter().any(|l| g.matches(l));
        (self.include.is_empty() || self.include.iter().any(has)) && !self.exclude.iter().any(has)
    }

    /// The `!` entry that rejects `name`, if one does (for refusal messages).
    pub fn excluded_by(&self, name: &str) -> Option<&str> {
        self.exclude
            .iter()
            .find(|g| g.matches(name))
            .map(Glob::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_stars_and_marks() {
        let m = |p: &str, t: &str| Glob::new(p).matches(t);
        assert!(m("github/*", "github/create_issue"));
        assert!(!m("github/*", "gitlab/create_issue"));
        assert!(m("*", "a/b/c"));
        assert!(m("*/delete_*", "fs/delete_file"));
        assert!(!m("*/delete_*", "fs/remove_file"));
        assert!(m("a?c", "abc") && !m("a?c", "ac"));
        assert!(m("github/get_*_issue", "github/get_one_issue"));
        assert!(!m("github/get_*_issue", "github/get_one_issues"));
        assert!(m("", "") && !m("", "x"));
        assert!(m("x**", "x"));
        assert!(m("wetter/prévision_*", "wetter/prévision_heute"));
        assert!(m("é?", "éà") && !m("é?", "é"));
        assert!(m("a*", "a*") && m("a?", "a*"));
        // Backtracking is bounded: a pathological pattern still answers.
        let long = "a".repeat(2000);
        assert!(!m("*a*a*a*a*a*a*a*a*b", &long));
    }

    #[test]
    fn lists_include_and_exclude() {
        let l = PatternList::parse(&["github/*", "!github/delete_*"]);
        assert!(l.matches("github/create_issue"));
        assert!(!l.matches("github/delete_repo"));
        assert!(!l.matches("docs/search"));
        assert_eq!(l.excluded_by("github/delete_repo"), Some("github/delete_*"));
        let only_ex = PatternList::parse(&["!*/delete_*"]);
        assert!(only_ex.matches("docs/search") && !only_ex.matches("fs/delete_file"));
        assert!(PatternList::default().matches("anything"));
        let tags = PatternList::parse(&["triage", "!admin"]);
        assert!(tags.matches_any(&["triage"]));
        assert!(!tags.matches_any(&["triage", "admin"]));
        assert!(!tags.matches_any(&[]));
    }

    #[test]
    fn specificity_prefers_literal_patterns() {
        assert!(
            Glob::new("github/delete_repo").specificity() > Glob::new("github/*").specificity()
        );
    }
}
