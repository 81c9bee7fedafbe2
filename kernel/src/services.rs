//! Typed APIs that extensions publish for each other.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

/// A map from API type (usually a trait object) to the extension's implementation.
///
/// The memory maintenance extension, for instance, finds `dyn MemoryApi` here without the kernel
/// depending on either crate.
#[derive(Default)]
pub struct Services {
    entries: HashMap<TypeId, (String, Box<dyn Any + Send + Sync>)>,
}

impl Services {
    /// Inserts `api`; returns the previous provider's name if `T` was already provided.
    pub(crate) fn insert<T: ?Sized + Send + Sync + 'static>(
        &mut self,
        owner: &str,
        api: Arc<T>,
    ) -> Option<String> {
        self.entries
            .insert(TypeId::of::<T>(), (owner.to_owned(), Box::new(api)))
            .map(|(previous, _)| previous)
    }

    /// The implementation of `T`, if an enabled extension provides it.
    pub fn get<T: ?Sized + Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.entries
            .get(&TypeId::of::<T>())
            .and_then(|(_, boxed)| boxed.downcast_ref::<Arc<T>>())
            .cloned()
    }

    /// The name of the extension providing `T`.
    pub fn provider_of<T: ?Sized + Send + Sync + 'static>(&self) -> Option<&str> {
        self.entries
            .get(&TypeId::of::<T>())
            .map(|(owner, _)| owner.as_str())
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("count", &self.entries.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    trait Greeter: Send + Sync {
        fn greet(&self) -> String;
    }
    struct English;
    impl Greeter for English {
        fn greet(&self) -> String {
            "hello".into()
        }
    }

    #[test]
    fn finds_trait_objects_by_type() {
        let mut services = Services::default();
        assert!(services.get::<dyn Greeter>().is_none());
        services.insert::<dyn Greeter>("greeter", Arc::new(English));
        assert_eq!(services.get::<dyn Greeter>().unwrap().greet(), "hello");
        assert_eq!(services.provider_of::<dyn Greeter>(), Some("greeter"));
        assert!(services.get::<String>().is_none());
    }
}
