pub async fn placeholder() {}
