//! cairn-store's own attribute, [`macro@on_store_runtime`]: the store's
//! public async methods are written as plain `async fn`s (which rustfmt
//! formats), and each runs with the store's runtime current all the same.
//!
//! The hop itself is `cairn-store`'s `crate::runtime::hop`; this crate only
//! puts every public method's body inside it, so that none can be written
//! without it. `cairn-store`'s test `runtime::coverage` checks that every
//! impl block with a public async method carries the attribute.

use proc_macro::TokenStream;
use quote::{ToTokens, quote};
use syn::spanned::Spanned;
use syn::{ImplItem, ItemImpl, ReturnType, Visibility, parse_macro_input};

/// On an `impl` block of `cairn-store`: runs the body of each public async
/// method (each async method of a trait impl) inside `crate::runtime::hop`.
#[proc_macro_attribute]
pub fn on_store_runtime(args: TokenStream, item: TokenStream) -> TokenStream {
    parse_macro_input!(args as syn::parse::Nothing);
    let mut block = parse_macro_input!(item as ItemImpl);
    let trait_impl = block.trait_.is_some();
    for item in &mut block.items {
        let ImplItem::Fn(method) = item else {
            continue;
        };
        let public = trait_impl || matches!(method.vis, Visibility::Public(_));
        if !public || method.sig.asyncness.is_none() {
            continue;
        }
        let output = match &method.sig.output {
            ReturnType::Default => quote!(()),
            // `impl Trait` cannot be named in a turbofish; inference finds it.
            ReturnType::Type(_, ty) if names_impl_trait(ty) => quote!(_),
            ReturnType::Type(_, ty) => ty.to_token_stream(),
        };
        let body = &method.block;
        // `async move`, like an `async fn`: the arguments live (and drop) in
        // the body, inside the hop. A `return` or `?` leaves the block, whose
        // value is the method's.
        method.block = syn::parse_quote_spanned! {body.span()=> {
            crate::runtime::hop::<#output, _>(async move #body).await
        }};
    }
    block.into_token_stream().into()
}

/// Whether a return type mentions `impl Trait` anywhere.
fn names_impl_trait(ty: &syn::Type) -> bool {
    ty.to_token_stream()
        .to_string()
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|word| word == "impl")
}
