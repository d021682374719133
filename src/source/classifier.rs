use super::RequestView;
use http::Method;

/// Gives a request a value by the first entry whose method and path match it, e.g. `login`
/// for `POST /auth/login`.
#[derive(Debug, Clone)]
pub(crate) struct Classifier {
    entries: Vec<ClassifierEntry>,
}

#[derive(Debug, Clone)]
struct ClassifierEntry {
    value: String,
    method: Option<Method>,
    path: Option<PathPattern>,
}

impl Classifier {
    /// A classifier from `(value, method, path)` entries, tried in order; a `None` condition
    /// matches every request.
    pub(crate) fn new(entries: Vec<(String, Option<Method>, Option<PathPattern>)>) -> Self {
        Classifier {
            entries: entries
                .into_iter()
                .map(|(value, method, path)| ClassifierEntry {
                    value,
                    method,
                    path,
                })
                .collect(),
        }
    }

    /// The value of the first entry that matches `request`.
    pub(crate) fn classify<'c>(&'c self, request: &RequestView<'_>) -> Option<&'c str> {
        self.entries
            .iter()
            .find(|entry| {
                entry.method.as_ref().is_none_or(|m| m == request.method)
                    && entry
                        .path
                        .as_ref()
                        .is_none_or(|p| p.matches(request.uri.path()))
            })
            .map(|entry| entry.value.as_str())
    }
}

/// A path with `*` standing for exactly one segment: `/users/*/friends`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathPattern(String);

impl PathPattern {
    /// A pattern from its text.
    pub(crate) fn new(pattern: impl Into<String>) -> Self {
        PathPattern(pattern.into())
    }

    /// Whether `path` matches, segment by segment.
    pub(crate) fn matches(&self, path: &str) -> bool {
        let mut pattern = self.0.split('/');
        let mut path = path.split('/');
        loop {
            match (pattern.next(), path.next()) {
                (None, None) => return true,
                (Some("*"), Some(segment)) if !segment.is_empty() => {}
                (Some(expected), Some(segment)) if expected == segment => {}
                _ => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_matches_exactly_one_non_empty_segment() {
        let pattern = PathPattern::new("/users/*/friends");
        assert!(pattern.matches("/users/42/friends"));
        assert!(!pattern.matches("/users//friends"));
        assert!(!pattern.matches("/users/1/2/friends"));
        assert!(!pattern.matches("/users/42/friends/extra"));
        assert!(!pattern.matches("/users/42"));
    }

    #[test]
    fn first_matching_entry_wins() {
        let classifier = Classifier::new(vec![
            (
                "login".into(),
                Some(Method::POST),
                Some(PathPattern::new("/auth/login")),
            ),
            (
                "any-auth".into(),
                None,
                Some(PathPattern::new("/auth/login")),
            ),
        ]);
        let post = http::Request::post("/auth/login").body(()).unwrap();
        let get = http::Request::get("/auth/login").body(()).unwrap();
        let other = http::Request::get("/elsewhere").body(()).unwrap();
        assert_eq!(classifier.classify(&RequestView::of(&post)), Some("login"));
        assert_eq!(
            classifier.classify(&RequestView::of(&get)),
            Some("any-auth")
        );
        assert_eq!(classifier.classify(&RequestView::of(&other)), None);
    }

    #[test]
    fn entries_without_a_method_match_every_method() {
        let classifier = Classifier::new(vec![
            (
                "login".to_owned(),
                Some(Method::POST),
                Some(PathPattern::new("/auth/login")),
            ),
            (
                "friends".to_owned(),
                None,
                Some(PathPattern::new("/users/*/friends")),
            ),
        ]);
        let request = http::Request::get("/users/7/friends").body(()).unwrap();
        assert_eq!(
            classifier.classify(&RequestView::of(&request)),
            Some("friends")
        );
    }
}
