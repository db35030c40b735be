
impl ResourceEventHandler<Foo> for FooHandler {
    fn on_add(&self, obj: &Arc<Foo>, _is_in_initial_list: bool) {
        self.added(obj);
    }

    fn on_update(&self, old: &Arc<Foo>, new: &Arc<Foo>) {
        self.updated(old, new);
    }
}

impl ResourceEventHandler<Deployment> for DeploymentHandler {
    fn on_add(&self, obj: &Arc<Deployment>, _is_in_initial_list: bool) {
        self.added(obj);
    }

    fn on_update(&self, old: &Arc<Deployment>, new: &Arc<Deployment>) {
        self.updated(old, new);
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<Deployment>) {
        self.deleted(obj);
    }
}
