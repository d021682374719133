//! Sources read from a type in the request extensions: the [`Identity`](super::Identity), or
//! a type of the application's (a tenant, an API key's owner) that an earlier layer stored.

use http::Extensions;
use std::any::type_name;
use std::fmt;

/// Reads a request's value from its extensions: the `T` of [`read`], monomorphised.
type Read = for<'e> fn(&'e Extensions) -> Option<&'e str>;

/// The value of the `T` in `extensions`, if there is one.
fn read<T: AsRef<str> + Send + Sync + 'static>(extensions: &Extensions) -> Option<&str> {
    extensions.get::<T>().map(T::as_ref)
}

/// A source whose value is a type in the request extensions: typed in Rust from the start,
/// or named in a rules file (`{ extension: NAME }`) until Rust binds a type to the name.
#[derive(Clone)]
pub(crate) struct ExtensionSource {
    /// The name a rules file gives it; `None` when it was typed in Rust.
    name: Option<Box<str>>,
    /// Its type's reader; `None` while no type is bound to the name.
    read: Option<Read>,
    /// Its type's name, for debugging.
    type_name: &'static str,
}

impl ExtensionSource {
    /// The `T` in the request extensions.
    pub(crate) fn of<T: AsRef<str> + Send + Sync + 'static>() -> Self {
        ExtensionSource {
            name: None,
            read: Some(read::<T>),
            type_name: type_name::<T>(),
        }
    }

    /// The extension that a rules file names `name`, of no type yet.
    pub(crate) fn named(name: &str) -> Self {
        ExtensionSource {
            name: Some(name.into()),
            read: None,
            type_name: "(none bound)",
        }
    }

    /// The name a rules file gives the extension, if it came from one.
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Whether a type is bound, so that requests can have a value.
    pub(crate) fn is_bound(&self) -> bool {
        self.read.is_some()
    }

    /// Reads this source from the `T` in the request extensions from now on.
    pub(crate) fn bind<T: AsRef<str> + Send + Sync + 'static>(&mut self) {
        self.read = Some(read::<T>);
        self.type_name = type_name::<T>();
    }

    /// Binds to this source the type of `bound`, when both are named alike and this one is
    /// bound to none.
    pub(crate) fn keep_binding_of(&mut self, bound: &ExtensionSource) {
        if self.read.is_none() && self.name.is_some() && self.name == bound.name {
            self.read = bound.read;
            self.type_name = bound.type_name;
        }
    }

    /// The request's value: `None` when its extensions hold no value of the type, or no type
    /// is bound.
    #[inline]
    pub(crate) fn value<'e>(&self, extensions: &'e Extensions) -> Option<&'e str> {
        self.read.and_then(|read| read(extensions))
    }
}

impl fmt::Debug for ExtensionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExtensionSource")
            .field("name", &self.name)
            .field("type", &self.type_name)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct Tenant(String);

    impl AsRef<str> for Tenant {
        fn as_ref(&self) -> &str {
            &self.0
        }
    }

    #[test]
    fn a_named_extension_has_no_value_until_a_type_is_bound() {
        let mut extensions = Extensions::new();
        extensions.insert(Tenant("acme".to_owned()));
        let mut source = ExtensionSource::named("tenant");
        assert_eq!(source.value(&extensions), None);
        source.bind::<Tenant>();
        assert_eq!(source.value(&extensions), Some("acme"));
        assert_eq!(source.value(&Extensions::new()), None);
    }

    #[test]
    fn a_binding_is_kept_only_by_an_unbound_source_of_the_same_name() {
        let mut bound = ExtensionSource::named("tenant");
        bound.bind::<Tenant>();
        let mut extensions = Extensions::new();
        extensions.insert(Tenant("acme".to_owned()));
        let mut same = ExtensionSource::named("tenant");
        same.keep_binding_of(&bound);
        assert_eq!(same.value(&extensions), Some("acme"));
        let mut other = ExtensionSource::named("org");
        other.keep_binding_of(&bound);
        assert!(!other.is_bound());
    }
}
