//! Typed APIs that extensions publish for each other.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// The published APIs, each with the name of the extension that provides it.
type Entries = HashMap<TypeId, (String, Box<dyn Any + Send + Sync>)>;

/// A map from API type (usually a trait object) to the extension's implementation.
///
/// The memory maintenance extension, for instance, finds `dyn MemoryApi` here without the kernel
/// depending on either crate. A service may hold the kernel's context, which holds this map: the
/// kernel [clears](Self::clear) it at shutdown so that the cycle does not keep them alive.
#[derive(Default)]
pub struct Services {
    entries: RwLock<Entries>,
}

impl Services {
    /// Inserts `api`; returns the previous provider's name if `T` was already provided.
    pub(crate) fn insert<T: ?Sized + Send + Sync + 'static>(
        &mut self,
        owner: &str,
        api: Arc<T>,
    ) -> Option<String> {
        self.entries
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(TypeId::of::<T>(), (owner.to_owned(), Box::new(api)))
            .map(|(previous, _)| previous)
    }

    /// The implementation of `T`, if an enabled extension provides it (none after shutdown).
    pub fn get<T: ?Sized + Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.read()
            .get(&TypeId::of::<T>())
            .and_then(|(_, boxed)| boxed.downcast_ref::<Arc<T>>())
            .cloned()
    }

    /// The name of the extension providing `T`.
    pub fn provider_of<T: ?Sized + Send + Sync + 'static>(&self) -> Option<String> {
        self.read()
            .get(&TypeId::of::<T>())
            .map(|(owner, _)| owner.clone())
    }

    /// Drops every published API: the kernel's last step of shutdown. The APIs are dropped
    /// after the lock is released, so that one whose drop looks up another cannot deadlock.
    pub(crate) fn clear(&self) {
        let entries = std::mem::take(
            &mut *self
                .entries
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        drop(entries);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries> {
        self.entries
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("count", &self.read().len())
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
        assert_eq!(
            services.provider_of::<dyn Greeter>().as_deref(),
            Some("greeter")
        );
        assert!(services.get::<String>().is_none());
    }

    #[test]
    fn clearing_drops_every_api() {
        let mut services = Services::default();
        let greeter: Arc<dyn Greeter> = Arc::new(English);
        let watch = Arc::downgrade(&greeter);
        services.insert::<dyn Greeter>("greeter", greeter);
        assert!(watch.upgrade().is_some());
        services.clear();
        assert!(services.get::<dyn Greeter>().is_none());
        assert!(services.provider_of::<dyn Greeter>().is_none());
        assert!(watch.upgrade().is_none(), "the map still held the API");
    }
}
